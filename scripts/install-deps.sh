#!/usr/bin/env bash
# Installs the Debian 12 packages the project needs, and only those missing.
# Idempotent: a second run installs nothing.
set -euo pipefail

packages=(
  build-essential g++ gfortran pkg-config meson ninja-build
  libspdlog-dev libfmt-dev libgtest-dev libgmock-dev
  libssl-dev  # libcrypto: SHA-256 of the emulator's job secret
  libopenmpi-dev openmpi-bin
  libhwloc-dev libxrt-dev
  python3 python3-dev pybind11-dev python3-numpy python3-pytest
  clang libclang-rt-14-dev iproute2 valgrind
  # simulator-session device (ACCL_DEVICE=sim) and building public ACCL's cclo_emu for its tests
  libzmq3-dev cppzmq-dev nlohmann-json3-dev cmake libjsoncpp-dev libtclap-dev
  # ScaLAPACK acceptance testers (tests/scalapack): xdlu, xzlu, xdqr, xsinv, xCbtest
  # (Open MPI build under /usr/lib/<arch>/scalapack/openmpi-tests) and their input files
  scalapack-mpi-test scalapack-test-common
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"

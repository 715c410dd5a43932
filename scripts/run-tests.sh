#!/usr/bin/env bash
# Command 2 of the README (and what CI runs): the whole test suite.
#  1. a build with warnings as errors, public ACCL's cclo_emu (tests/sim), every test (unit, emulator, MPI,
#     PMPI, the driver and PMPI on public ACCL's firmware);
#  2. AddressSanitizer + UndefinedBehaviorSanitizer build: a subset covering driver, firmware,
#     emulator, transports and PMPI;
#  3. ThreadSanitizer build: the same subset without MPI.
# Set ACCL_TEST_QUICK=1 to run only step 1.
#
# Compile time is most of CI's time, so the CI builds keep only the debug
# information a failure report needs: step 1 optimises (-O2, so the warnings
# that only optimisation finds still stop the build), with asserts on
# (b_ndebug=false: without debug, meson's default 'if-release' could drop
# them) and no debug information; the sanitizer builds use -O1 (what the
# sanitizers recommend). ASan/UBSan, the longest stage, names functions in its stack
# traces from the symbol tables (no debug information); TSan keeps line tables
# (-g1) for its race reports. Measured on the 2-core VM, per heavy translation
# unit: -O2 -g -> -O2 -g0 30 -> 18 s (test_collectives.cpp); ASan -O2 -g ->
# -O1 -g1 -> -O1 -g0 72 -> 28 -> 23 s (transport_udp.cpp, now emu/src/udp/). CI on a clean
# clone: 46 min (stop 14, -O2 -g everywhere) -> 27 min (stages 770 / 611 /
# 257 s) on a VM about twice as slow as the one of stop 13. Each source file is
# compiled once per build (tests/transport links the emulator's transport
# library instead of building the transports again): 1588 -> 1553 s (723 / 599 /
# 231 s) on the 2-core VM of stop 19.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

jobs=$(nproc)
configure() {  # dir, extra meson args...
  local dir=$1; shift
  if [[ -f $dir/build.ninja ]]; then
    meson configure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@"
  fi
}

stage() { echo "== $1 (at ${SECONDS} s)"; }

stage "build with warnings as errors"
configure build-ci -Doptimization=2 -Ddebug=false -Db_ndebug=false -Dwerror=true
ninja -C build-ci
# Public ACCL's cclo_emu for suite public-sim (the driver and the PMPI layer on the public firmware), built
# from ../shared/peers/accl-public once per build tree (3-6 minutes on 2 cores; skipped while up to date;
# without the peer folder the public-sim tests report themselves skipped and say why).
stage "public ACCL's cclo_emu"
ninja -C build-ci accl-public-emu
# Suite 'known-bugs' holds reproducers of open bugs (they fail until fixed);
# run them by hand with `meson test -C build-ci --suite known-bugs`.
meson test -C build-ci --print-errorlogs --num-processes "$jobs" --no-suite known-bugs

if [[ ${ACCL_TEST_QUICK:-0} == 1 ]]; then exit 0; fi

# The sanitizer builds compile only what their tests need and run a subset
# chosen to cover every layer (driver, firmware, emulator, transports, PMPI)
# within CI's time budget.
sanitizer_targets=(
  core/tests/core-unit-encoding core/tests/core-unit-configuration core/tests/core-unit-calls
  core/tests/core-unit-buffers core/tests/core-unit-containers tests/firmware/firmware-unit tests/emu/test_emu tests/emu/test_emu_e2e
  tests/transport/test_transport_tcp tests/transport/test_transport_shm tests/transport/test_transport_shm-poll
  tests/transport/test_transport_shm-shared
  tests/transport/test_transport_shm-direct
  tests/transport/test_transport_udp tests/core/core-async tests/core/core-primitives tests/core/core-errors
)
sanitizer_tests=(
  core-unit-encoding core-unit-configuration core-unit-calls core-unit-buffers core-unit-containers firmware-unit
  emu-memory emu-call-controller emu-arith emu-sink emu-inproc emu-mover emu-wakeup emu-end-to-end
  transport-tcp transport-shm transport-shm-poll transport-shm-shared transport-shm-direct transport-udp core-async
)
asan_only_tests=(core-primitives core-errors)
mpi_sanitizer_targets=(pmpi/libaccl_pmpi.so tests/pmpi/pmpi_test_colls_plain tests/pmpi/pmpi_test_p2p_plain
  tests/pmpi/pmpi_test_bad_input_plain tests/pmpi/pmpi_fuzz_mpi_args tests/pmpi/pmpi_test_progress_plain)
mpi_sanitizer_tests=(pmpi_colls_preload_np2_quick pmpi_p2p_preload_np2_quick pmpi_bad_input_preload_np3
  pmpi_fuzz_mpi_args_preload_np3 pmpi_progress_np2)

asan_build=(-Doptimization=1 -Ddebug=false -Db_ndebug=false)
tsan_build=(-Doptimization=1 -Ddebug=true -Db_ndebug=false -Dcpp_args=-g1 -Dc_args=-g1)

# Open MPI's own allocations are not ours to fix: no leak checking in MPI runs.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
stage "AddressSanitizer + UndefinedBehaviorSanitizer"
configure build-asan "${asan_build[@]}" -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=true \
  -Dpython=disabled
ninja -C build-asan "${sanitizer_targets[@]}" "${mpi_sanitizer_targets[@]}"
meson test -C build-asan --no-rebuild --print-errorlogs --num-processes "$jobs" \
  "${sanitizer_tests[@]}" "${asan_only_tests[@]}" "${mpi_sanitizer_tests[@]}"

stage "ThreadSanitizer"
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
configure build-tsan "${tsan_build[@]}" -Db_sanitize=thread -Db_lundef=false -Dwerror=true \
  -Dmpi=disabled -Dpython=disabled
# All but core-primitives and core-errors (long under TSan, and covered by the other two stages).
tsan_targets=()
for target in "${sanitizer_targets[@]}"; do
  case $target in
    */core-primitives | */core-errors) ;;
    *) tsan_targets+=("$target") ;;
  esac
done
ninja -C build-tsan "${tsan_targets[@]}"
meson test -C build-tsan --no-rebuild --print-errorlogs --num-processes "$jobs" "${sanitizer_tests[@]}"
stage "done"

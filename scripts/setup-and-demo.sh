#!/usr/bin/env bash
# Command 1 of the README: install what is missing, build, and run the demo
# (seed 000: four emulated CCLOs in one process, allreduce of 1000 floats).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
if [[ ! -f build/build.ninja ]]; then
  meson setup build --buildtype=release
fi
ninja -C build
build/examples/accl-demo

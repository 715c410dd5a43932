#!/usr/bin/env bash
# Command 2 of the README (and what CI runs): the whole test suite.
#  1. a build with warnings as errors, every test (unit, emulator, MPI, PMPI);
#  2. AddressSanitizer + UndefinedBehaviorSanitizer build, the core/emu/firmware/PMPI suites;
#  3. ThreadSanitizer build, the multi-threaded core suites.
# Set ACCL_TEST_QUICK=1 to run only step 1.
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

echo "== build with warnings as errors"
configure build-ci --buildtype=debugoptimized -Dwerror=true
ninja -C build-ci
meson test -C build-ci --print-errorlogs --num-processes "$jobs"

if [[ ${ACCL_TEST_QUICK:-0} == 1 ]]; then exit 0; fi

# Open MPI's own allocations are not ours to fix: no leak checking in MPI runs.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "== AddressSanitizer + UndefinedBehaviorSanitizer"
configure build-asan --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=true
ninja -C build-asan
meson test -C build-asan --print-errorlogs --num-processes "$jobs" --no-suite bench --no-suite slow

echo "== ThreadSanitizer"
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
configure build-tsan --buildtype=debug -Db_sanitize=thread -Db_lundef=false -Dwerror=true -Dmpi=disabled
ninja -C build-tsan
meson test -C build-tsan --print-errorlogs --num-processes "$jobs" --no-suite bench --no-suite slow

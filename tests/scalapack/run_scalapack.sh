#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ScaLAPACK acceptance (issue 37): Debian's unchanged ScaLAPACK testers (Open
# MPI build, package scalapack-mpi-test) natively and under
# LD_PRELOAD=libaccl_pmpi.so, each checked from its own output; prints both
# wall times and their ratio (no timing assertion: the 2x-native target is
# reported, not tested, because shared CI machines make times noisy).
#
#   run_scalapack.sh --preload LIB [--np 4] [--timeout S] [--mode both|native|preload]
#                    [--policy offload|auto] [TESTER...]
#
# --policy: ACCL_POLICY of the preloaded runs. offload (default): every call the
# device can run goes to ACCL, which tests the offload path; auto: the user's
# default settings (the shipped tuning table decides).
#
# TESTER: xdlu xzlu xdqr xsinv xCbtest (default: all five). Each run is
# bounded by --timeout seconds (default 150): a deadlock fails the run
# instead of stalling CI. Exit status: 0 all passed, 1 a run failed,
# 77 (meson: skipped) the testers are not installed (scripts/install-deps.sh).
set -uo pipefail

np=4
timeout_s=150
mode=both
policy=offload
preload=
testers=()
while (($#)); do
  case $1 in
    --np) np=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --preload) preload=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "run_scalapack: unknown option $1" >&2; exit 2 ;;
    *) testers+=("$1"); shift ;;
  esac
done
((${#testers[@]})) || testers=(xdlu xzlu xdqr xsinv xCbtest)
case $mode in both | native | preload) ;; *) echo "run_scalapack: --mode both|native|preload" >&2; exit 2 ;; esac
case $policy in offload | auto) ;; *) echo "run_scalapack: --policy offload|auto" >&2; exit 2 ;; esac
if [[ $mode != native && ! -f $preload ]]; then
  echo "run_scalapack: --preload must name the built libaccl_pmpi.so (got '${preload}')" >&2
  exit 2
fi

tester_dir=
for d in /usr/lib/*/scalapack/openmpi-tests; do
  [[ -x $d/xdlu ]] && tester_dir=$d
done
if [[ -z $tester_dir ]]; then
  echo "run_scalapack: SKIP: Debian's ScaLAPACK testers (scalapack-mpi-test) are not installed; run scripts/install-deps.sh"
  exit 77
fi

# The testers read their input (LU.dat, QR.dat, INV.dat, BLACS/bt.dat, ...)
# from the working directory and write nothing else.
work=$(mktemp -d /tmp/accl-scalapack.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -L "$tester_dir"/*.dat "$tester_dir"/BLACS/*.dat "$work"/

export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export OMPI_MCA_hwloc_base_binding_policy=${OMPI_MCA_hwloc_base_binding_policy:-none}
export OMPI_MCA_btl_base_warn_component_unused=0

# A LAPACK-style tester passed if it reached its end, counted passing tests,
# and counted no failing one (illegal-input skips are part of its input).
check_lapack_tester() {  # output file
  local out=$1 passed failed
  grep -q 'END OF TESTS' "$out" || { echo "did not reach END OF TESTS"; return 1; }
  passed=$(sed -n 's/^ *\([0-9][0-9]*\) tests completed and passed residual checks.*/\1/p' "$out" | tail -1)
  failed=$(sed -n 's/^ *\([0-9][0-9]*\) tests completed and failed residual checks.*/\1/p' "$out" | tail -1)
  [[ -n $passed && $passed -gt 0 ]] || { echo "no test passed its residual check"; return 1; }
  [[ $failed == 0 ]] || { echo "${failed:-an unknown number of} tests failed their residual checks"; return 1; }
  if grep -qE '^WALL .* FAILED' "$out"; then echo "a result line says FAILED"; return 1; fi
  echo "$passed tests passed"
}

# The BLACS C tester: 22 typed sections (5 SDRV, 5 BSBR, 12 COMB), each
# "N TESTS; P PASSED, S SKIPPED, 0 FAILED.", and 5 auxiliary tests PASSED (the
# repeatable-sum test is skipped natively too): 27 sections. It ends by
# testing BLACS_ABORT, which kills the job on purpose (non-zero exit).
check_blacs_tester() {  # output file
  local out=$1 sections bad aux
  sections=$(grep -cE 'TESTS: +[0-9]+ TESTS; +[0-9]+ PASSED, +[0-9]+ SKIPPED, +0 FAILED\.' "$out")
  bad=$(grep -E 'TESTS: +[0-9]+ TESTS; .*FAILED\.' "$out" | grep -vcE ' 0 FAILED\.')
  aux=$(grep -cE '^ *PASSED +(BLACS_PNUM/BLACS_PCOORD|BLACS_GRIDMAP|LOCALLY-BLOCKING CONTIGUOUS SEND|LOCALLY-BLOCKING NON-CONTIGUOUS SEND|BLACS_SET/BLACS_GET) TEST' "$out")
  if ((bad > 0)) || grep -qE '^ *FAILED ' "$out"; then echo "a section failed"; return 1; fi
  ((sections == 22)) || { echo "$sections of 22 typed sections passed"; return 1; }
  ((aux == 5)) || { echo "$aux of 5 auxiliary tests passed"; return 1; }
  grep -q 'final auxiliary test is for BLACS_ABORT' "$out" || { echo "did not reach the BLACS_ABORT test"; return 1; }
  echo "27 of 27 sections passed"
}

# Runs one tester; sets run_seconds and run_verdict, returns 0 if it passed.
run_one() {  # tester, native|preload
  local tester=$1 how=$2 out="$work/$1.$2.out" rc start end detail
  # unbuffered Fortran output: a deadlocked run still shows how far it got
  local -a cmd=(mpirun -np "$np" -x GFORTRAN_UNBUFFERED_PRECONNECTED=y)
  # --policy offload: every call the device can run goes to ACCL; auto: the default settings
  [[ $how == preload ]] && cmd+=(-x "LD_PRELOAD=$preload" -x "ACCL_POLICY=$policy")
  cmd+=("$tester_dir/$tester")
  start=$(date +%s.%N)
  (cd "$work" && timeout --kill-after=10 "$timeout_s" "${cmd[@]}") >"$out" 2>&1
  rc=$?
  end=$(date +%s.%N)
  run_seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  if ((rc == 124 || rc == 137)); then
    run_verdict="FAILED: no result within ${timeout_s} s (deadlock?)"
  elif [[ $tester == xCbtest ]]; then
    if detail=$(check_blacs_tester "$out"); then run_verdict="passed ($detail)"; else run_verdict="FAILED: $detail"; fi
  elif ((rc != 0)); then
    run_verdict="FAILED: exit code $rc"
  elif detail=$(check_lapack_tester "$out"); then
    run_verdict="passed ($detail)"
  else
    run_verdict="FAILED: $detail"
  fi
  if [[ $run_verdict == FAILED* ]]; then
    echo "---- last lines of $tester ($how) ----"
    grep -vE '^ *$|IEEE_DENORMAL' "$out" | tail -15
    echo "----"
    return 1
  fi
  return 0
}

echo "ScaLAPACK testers from $tester_dir, np $np, timeout ${timeout_s} s per run"
failures=0
summary=()
for tester in "${testers[@]}"; do
  if [[ ! -x $tester_dir/$tester ]]; then
    echo "$tester: FAILED: not found in $tester_dir"
    failures=$((failures + 1))
    continue
  fi
  native_s=- preload_s=- ratio=- both_passed=1
  if [[ $mode != preload ]]; then
    run_one "$tester" native || { failures=$((failures + 1)); both_passed=0; native_s="(failed)"; }
    [[ $native_s == - ]] && native_s=$run_seconds
    echo "$tester native: $run_seconds s, $run_verdict"
  fi
  if [[ $mode != native ]]; then
    run_one "$tester" preload || { failures=$((failures + 1)); both_passed=0; preload_s="(failed)"; }
    [[ $preload_s == - ]] && preload_s=$run_seconds
    echo "$tester preload: $run_seconds s, $run_verdict"
  fi
  if [[ $mode == both && $both_passed == 1 ]]; then
    ratio=$(awk -v n="$native_s" -v p="$preload_s" 'BEGIN { if (n > 0) printf "%.2fx", p / n; else print "-" }')
  fi
  summary+=("$(printf '%-8s native %7s s   preload(%s) %7s s   preload/native %s (target <= 2x)' "$tester" "$native_s" "$policy" "$preload_s" "$ratio")")
done
echo "== summary"
printf '%s\n' "${summary[@]}"
if ((failures)); then
  echo "run_scalapack: $failures run(s) failed"
  exit 1
fi
echo "run_scalapack: all runs passed"

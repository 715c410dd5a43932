#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# netns-two-hosts: two ACCL ranks on two "hosts" = two network namespaces
# joined by a veth pair (10.77.0.1/24 <-> 10.77.0.2/24), over the emulator's
# TCP transport. Needs root and iproute2; exits 77 (meson: skipped) otherwise.
#
#   run_netns.sh path/to/two-hosts [--mpi path/to/mpi-two-hosts path/to/libaccl_pmpi.so]
#                [--phases "basic wildcard links mpi late"]  (default: basic wildcard links mpi)
#
# Phases:
# basic: send/recv, allreduce, bcast, compressed allreduce, barrier across the
#    two namespaces, every result checked.
# wildcard: basic, and (with --mpi) the MPI phase, with every emulated CCLO
#    bound to 0.0.0.0 (ACCL_EMU_BIND_ADDRESS, the natural setting on a
#    cluster): each is then known by its host's address (10.77.0.x), and
#    peers are told apart by that identity, never by the address a
#    connection arrives from (issue 38: every rendezvous transfer was
#    discarded, "matches no open window").
# links:
# 1. link down: a loop of allreduces; once it runs, `ip link set <veth> down`
#               on host A. Both ranks must get accl::DeviceError naming
#               LINK_ERROR or RECEIVE_TIMEOUT_ERROR within the bound (two-hosts
#               checks it; ACCL_TIMEOUT_MS=3000) and exit; never hang.
# 2. the same with 4 MiB allreduces (senders blocked in TCP sends).
# 3. peer killed: rank 1 gets SIGKILL mid-loop; rank 0 must report a named
#               error (LINK_ERROR: the dead process's kernel closes the TCP
#               connections) and exit.
# 4. veth gone: as 1, but host B's end of the veth is deleted.
# mpi (with --mpi): MPI across the two hosts: mpirun runs in namespace A, an
#    rsh agent starts the remote daemon in namespace B (`ip netns exec`), the
#    PMPI layer is preloaded and ACCL_TRACE proves the calls were offloaded.
# late (not in the default set: meson test netns-late-rendezvous): a 64 MiB
#    receive over a veth throttled to 100 Mbit/s (tc tbf); the link goes down
#    mid-transfer, the receive fails at its deadline, the user refills the
#    buffer, the link comes back: no byte of the buffer may change afterwards.
#
# Namespace names are unique per run (pid + random) and removed by a trap, so
# concurrent runs and aborted runs leave nothing behind. Addresses and ports
# live inside the private namespaces, so they cannot collide with anything.
set -u

exe=${1:?usage: run_netns.sh path/to/two-hosts [--mpi mpi-two-hosts libaccl_pmpi.so]}
[ -x "$exe" ] || { echo "netns: $exe is not executable"; exit 1; }
shift
mpi_exe=""
pmpi_lib=""
phases="basic wildcard links mpi"
while [ $# -gt 0 ]; do
  case "$1" in
    --mpi)
      mpi_exe=${2:?--mpi needs the MPI program and the PMPI library}
      pmpi_lib=${3:?--mpi needs the MPI program and the PMPI library}
      shift 3 ;;
    --phases) phases=$2; shift 2 ;;
    *) echo "netns: unknown option $1"; exit 2 ;;
  esac
done
want() { case " $phases " in *" $1 "*) return 0 ;; esac; return 1; }

if [ "$(id -u)" -ne 0 ]; then
  echo "netns: SKIP: needs root (creates network namespaces)"
  exit 77
fi
if ! command -v ip >/dev/null 2>&1 || ! ip netns list >/dev/null 2>&1; then
  echo "netns: SKIP: 'ip netns' (iproute2) is not available"
  exit 77
fi

tag="$$$RANDOM"
nsA="accl-a-$tag"
nsB="accl-b-$tag"
vethA="vacc0"   # interface names live inside the namespaces: no clash between runs
vethB="vacc1"
ipA=10.77.0.1
ipB=10.77.0.2
portA=7101
portB=7102
logdir=$(mktemp -d /tmp/accl-netns.XXXXXX)
pids=()

cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  ip netns del "$nsA" 2>/dev/null
  ip netns del "$nsB" 2>/dev/null
  # The logs are printed as each phase ends; ACCL_NETNS_KEEP_LOGS=1 keeps the files.
  if [ "${ACCL_NETNS_KEEP_LOGS:-0}" = 1 ]; then echo "netns: logs kept in $logdir"; else rm -rf "$logdir"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if ! ip netns add "$nsA" 2>"$logdir/err" || ! ip netns add "$nsB" 2>>"$logdir/err"; then
  echo "netns: SKIP: cannot create network namespaces: $(cat "$logdir/err")"
  exit 77
fi

make_link() {
  ip -n "$nsA" link del "$vethA" 2>/dev/null
  ip link add "$vethA" netns "$nsA" type veth peer name "$vethB" netns "$nsB" || return 1
  ip -n "$nsA" addr add "$ipA/24" dev "$vethA" || return 1
  ip -n "$nsB" addr add "$ipB/24" dev "$vethB" || return 1
  for ns in "$nsA" "$nsB"; do ip -n "$ns" link set lo up || return 1; done
  ip -n "$nsA" link set "$vethA" up || return 1
  ip -n "$nsB" link set "$vethB" up || return 1
  # A veth end reports state UP once both ends are up (no ping on minimal
  # images; two-hosts' start barrier then proves IP connectivity).
  for _ in $(seq 50); do
    ip -n "$nsA" -o link show dev "$vethA" | grep -q 'state UP' &&
      ip -n "$nsB" -o link show dev "$vethB" | grep -q 'state UP' && return 0
    sleep 0.1
  done
  echo "netns: the veth pair did not come up"
  return 1
}

# run_pair MODE NAME [LOOP_COUNT [BIND]]: starts rank 0 in A and rank 1 in B
# in the background; each binds to its own address, or to BIND if given.
run_pair() {
  local mode=$1 name=$2 count=${3:-0} bind_all=${4:-}
  pids=()
  for r in 0 1; do
    local ns=$nsA ip=$ipA
    [ "$r" = 1 ] && ns=$nsB ip=$ipB
    # `timeout` is the last line of defence against a hang: the checks in
    # two-hosts are far tighter.
    ip netns exec "$ns" env ACCL_EMU_TRANSPORT=tcp ACCL_EMU_BIND_ADDRESS="${bind_all:-$ip}" ACCL_TIMEOUT_MS=3000 \
      ACCL_LOG_LEVEL="${ACCL_LOG_LEVEL:-warn}" \
      timeout -k 5 120 "$exe" --rank "$r" --ranks "$ipA:$portA,$ipB:$portB" --mode "$mode" --loop-seconds 60 --loop-count "$count" \
      >"$logdir/$name.$r.log" 2>&1 &
    pids+=($!)
  done
}

# wait_pair NAME [CHECKED]: waits for both ranks; prints their logs; 0 if
# every rank in CHECKED (default "0 1") exited 0.
wait_pair() {
  local name=$1 checked=${2:-"0 1"} rc=0
  for r in 0 1; do
    wait "${pids[$r]}"
    local st=$?
    echo "---- $name, rank $r (exit $st) ----"
    cat "$logdir/$name.$r.log"
    case " $checked " in *" $r "*) [ "$st" = 0 ] || rc=1 ;; esac
  done
  pids=()
  return $rc
}

# wait_marker NAME SECONDS: until both logs say LOOP_RUNNING.
wait_marker() {
  local name=$1 limit=$2
  for _ in $(seq $((limit * 10))); do
    if grep -q LOOP_RUNNING "$logdir/$name.0.log" 2>/dev/null && grep -q LOOP_RUNNING "$logdir/$name.1.log" 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

failures=0
step() { echo "== netns: $*"; }

make_link || exit 1

if want basic; then
  step "basic calls across namespaces ($nsA $ipA <-> $nsB $ipB)"
  run_pair basic basic
  if wait_pair basic; then step "basic: PASS"; else step "basic: FAIL"; failures=$((failures + 1)); fi
fi

if want wildcard; then
  step "basic calls, every CCLO bound to 0.0.0.0"
  run_pair basic wildcard 0 0.0.0.0
  if wait_pair wildcard; then step "wildcard: PASS"; else step "wildcard: FAIL"; failures=$((failures + 1)); fi
fi

# The link-failure phases: rank processes must end by themselves, with a
# named error, within a few device timeouts.
link_phase() {
  local name=$1 label=$2 action=$3 count=${4:-0} checked=${5:-"0 1"}
  step "$label: allreduce loop, then: $action"
  run_pair loop "$name" "$count"
  if ! wait_marker "$name" 60; then
    step "$label: FAIL: the loop never started"
    wait_pair "$name"
    failures=$((failures + 1))
    return
  fi
  local t0=$SECONDS
  eval "$action"
  if wait_pair "$name" "$checked"; then
    step "$label: PASS (rank(s) $checked reported a named error; $((SECONDS - t0)) s after the fault)"
  else
    step "$label: FAIL"
    failures=$((failures + 1))
  fi
}

if want links; then
  link_phase linkdown "link down" "ip -n $nsA link set $vethA down"
  make_link || exit 1
  # 4 MiB allreduces: the link goes down while TCP sends block on full socket
  # buffers, not only while a rank waits for data.
  link_phase linkdown-big "link down during 4 MiB transfers" "ip -n $nsA link set $vethA down" 1048576
  make_link || exit 1
  # The peer process dies (SIGKILL: no clean shutdown): its kernel closes the
  # connections, so the survivor sees LINK_ERROR at once, not a timeout.
  # pids[1] is `timeout`; the rank is its child.
  link_phase killed "peer process killed" 'kill -9 $(ps -o pid= --ppid "${pids[1]}")' 0 "0"
  link_phase vethdel "veth deleted" "ip -n $nsB link del $vethB"
fi

# --- MPI across the two namespaces -------------------------------------------------
# mpi_phase NAME [BIND]: each rank binds to its namespace's address, or to BIND.
mpi_phase() {
  local name=$1 bind_all=${2:-}
  step "$name: MPI (PMPI layer preloaded) across the namespaces${bind_all:+, bound to $bind_all}"
  if [ -z "$mpi_exe" ]; then step "MPI: skipped (built without MPI or the PMPI layer)"; return; fi
  if ! command -v mpirun >/dev/null 2>&1; then step "MPI: skipped (no mpirun)"; return; fi
  make_link || { failures=$((failures + 1)); return; }
  # rsh agent: Open MPI calls `agent HOST command...`; HOST is an IP of ours,
  # which names the namespace to run the command in.
  cat >"$logdir/agent.sh" <<AGENT
#!/bin/bash
host=\$1; shift
case "\$host" in
  $ipA) ns=$nsA ;;
  $ipB) ns=$nsB ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
  # Each rank binds its emulated CCLO to its own namespace's address (or
  # to the wildcard it is given).
  cat >"$logdir/rank.sh" <<RANK
#!/bin/bash
export ACCL_EMU_BIND_ADDRESS=${bind_all:-\$(ip -4 -o addr show scope global | awk '{print \$4}' | cut -d/ -f1 | head -1)}
exec "\$@"
RANK
  chmod +x "$logdir/agent.sh" "$logdir/rank.sh"
  local subnet=10.77.0.0/24
  ip netns exec "$nsA" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout -k 5 120 mpirun --host "$ipA,$ipB" -np 2 \
      --mca plm_rsh_agent "$logdir/agent.sh" --mca oob_tcp_if_include "$subnet" \
      --mca btl tcp,self --mca btl_tcp_if_include "$subnet" --mca btl_base_warn_component_unused 0 \
      -x LD_PRELOAD="$pmpi_lib" -x ACCL_POLICY=offload -x ACCL_EMU_TRANSPORT=tcp -x ACCL_TIMEOUT_MS=10000 -x ACCL_TRACE=1 \
      "$logdir/rank.sh" "$mpi_exe" >"$logdir/$name.log" 2>&1
  local st=$?
  echo "---- $name (exit $st) ----"
  grep -v "^\[accl-pmpi rank [01]\] MPI_.*offloaded" "$logdir/$name.log"
  echo "($(grep -c 'offloaded' "$logdir/$name.log") offloaded calls traced)"
  local ok=1
  [ "$st" = 0 ] || ok=0
  for r in 0 1; do
    grep -q "^mpi-two-hosts rank $r/2 .*: ok" "$logdir/$name.log" || { echo "MPI: rank $r did not report ok"; ok=0; }
    for call in MPI_Allreduce MPI_Bcast MPI_Reduce; do
      grep -q "^\[accl-pmpi rank $r\] $call .*: offloaded" "$logdir/$name.log" ||
        { echo "MPI: rank $r: $call was not offloaded to ACCL"; ok=0; }
    done
  done
  grep -q "^\[accl-pmpi rank 0\] MPI_Send .*: offloaded" "$logdir/$name.log" || { echo "MPI: MPI_Send not offloaded"; ok=0; }
  local ns_count
  ns_count=$(grep -o "^mpi-two-hosts rank ./2 netns [0-9]*" "$logdir/$name.log" | awk '{print $5}' | sort -u | wc -l)
  [ "$ns_count" = 2 ] || { echo "MPI: the ranks did not run in two different network namespaces"; ok=0; }
  if [ "$ok" = 1 ]; then step "$name: PASS"; else step "$name: FAIL"; failures=$((failures + 1)); fi
}
want mpi && mpi_phase mpi
want wildcard && mpi_phase mpi-wildcard 0.0.0.0

# --- late rendezvous data after a failed receive ---------------------------------
late_phase() {
  step "late rendezvous bytes after a failed receive"
  make_link || { failures=$((failures + 1)); return; }
  # 100 Mbit/s on A's side: the 64 MiB transfer takes ~5 s, so the link can go
  # down in the middle of it.
  if ! ip netns exec "$nsA" tc qdisc add dev "$vethA" root tbf rate 100mbit burst 64kb latency 50ms 2>"$logdir/tc.err"; then
    step "late: SKIP: cannot throttle the veth: $(cat "$logdir/tc.err")"
    skipped=$((skipped + 1))
    return
  fi
  run_pair late late
  for _ in $(seq 100); do
    grep -q RECV_POSTED "$logdir/late.1.log" 2>/dev/null && grep -q SEND_STARTED "$logdir/late.0.log" 2>/dev/null && break
    sleep 0.1
  done
  sleep 1
  ip -n "$nsA" link set "$vethA" down
  for _ in $(seq 200); do grep -q CALL_FAILED "$logdir/late.1.log" 2>/dev/null && break; sleep 0.1; done
  ip -n "$nsA" link set "$vethA" up
  if wait_pair late "1"; then step "late: PASS"; else step "late: FAIL"; failures=$((failures + 1)); fi
}
skipped=0
want late && late_phase
if [ "$phases" = late ] && [ "$skipped" = 1 ]; then exit 77; fi

if [ "$failures" = 0 ]; then
  echo "netns ($phases): PASS"
  exit 0
fi
echo "netns ($phases): FAIL ($failures phase(s))"
exit 1

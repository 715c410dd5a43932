# SPDX-License-Identifier: Apache-2.0
"""The arithmetic of the default-settings and the contended sections: speedup and verdict per size, the
slowdown under load, which sizes the shipped tuning table offloads and what it measured then, and the
ACCL_STATS table. Pure functions of recorded numbers (tests/bench/test_report_sections.py feeds them)."""

import re

from .common import speedup

# The default-settings section: what a user gets with LD_PRELOAD alone (ACCL_POLICY=auto and the shipped
# tuning table), every size from 1 B to 4 MiB; it must cost no more than 10 % anywhere.
DEFAULT_BENCHMARKS = ["latency", "bw", "allreduce", "bcast", "reduce", "allgather", "alltoall", "allgatherv",
                      "barrier"]
DEFAULT_MIN_SPEEDUP = 0.9
# A tuning decision still holds when the default run keeps 90 % of the gain measured at tuning time, or
# simply wins.
TUNING_KEEP = 0.9

# The contended section: a busy core per core; the offloaded path must not suffer more than twice the
# slowdown native MPI suffers.
CONTENDED_BENCHMARKS = ["latency", "bw", "allreduce"]
CONTENDED_MODES = ["idle-native", "idle-accl", "busy-native", "busy-accl"]
CONTENDED_MAX_RATIO = 2.0

# benchmark -> (the call's name in a tuning table, whether the layer counts the bytes of all ranks' blocks):
# as tools/accl-tune maps OSU sizes to the bytes its rules hold.
TUNING_CALLS = {
    "latency": ("p2p", False), "bw": ("p2p", False), "allreduce": ("allreduce", False),
    "bcast": ("bcast", False), "reduce": ("reduce", False), "scan": ("scan", False),
    "allgather": ("allgather", True), "alltoall": ("alltoall", True), "gather": ("gather", True),
    "scatter": ("scatter", True), "allgatherv": ("allgatherv", True), "alltoallv": ("alltoallv", True),
    "gatherv": ("gatherv", True), "scatterv": ("scatterv", True), "barrier": ("barrier", False),
}
UNSIZED = ("p2p", "barrier")  # decided per communicator: a rule's bytes never apply


def speedups(rec, bench, np_, native="native", accl="accl"):
    """{size: speedup or None} over the sizes of the native run (None: no ACCL value there)."""
    kind = rec.kind.get(bench, "lat")
    nb = rec.best.get((bench, np_, native), {})
    ab = rec.best.get((bench, np_, accl), {})
    return {s: speedup(kind, nb[s], ab.get(s)) for s in sorted(nb)}


def at_least_everywhere(by_size, limit):
    """-> (verdict, worst (size, value) or None, sizes that miss): MET when every size has a value >= limit;
    a size without a value misses (it was not measured there)."""
    if not by_size:
        return "not measured", None, []
    valued = [(s, v) for s, v in by_size.items() if v is not None]
    worst = min(valued, key=lambda sv: sv[1]) if valued else None
    missing = sorted(s for s, v in by_size.items() if v is None or v < limit)
    return ("MISSED" if missing else "MET"), worst, missing


def beyond_control(by_size, control, limit):
    """Sizes where `by_size` misses `limit` and is also below `control` there (a second native run's speedup
    over the first, same protocol, same session): misses that the spread of native MPI alone does not explain.
    A size without a value, or without a control value, counts."""
    return sorted(s for s, v in by_size.items()
                  if v is None or (v < limit and (control.get(s) is None or v < control[s])))


def at_most_everywhere(by_size, limit):
    """at_least_everywhere's mirror: every size has a value <= limit; worst is the largest value."""
    flipped = {s: (None if v is None else -v) for s, v in by_size.items()}
    verdict, worst, missing = at_least_everywhere(flipped, -limit)
    return verdict, (worst[0], -worst[1]) if worst else None, missing


def slowdowns(rec, bench, np_):
    """{size: (native slowdown, ACCL slowdown, ratio ACCL/native)} of the contended runs: contended time / idle
    time (bandwidth: idle MB/s / contended MB/s); None where a run is missing. The ratio takes a slowdown below 1
    as 1: a run that got faster under load was not slowed (on this VM small native messages often speed up beside
    busy loops, whose vCPUs never halt), and dividing by that gain would count it against the other path."""
    kind = rec.kind.get(bench, "lat")
    best = {m: rec.best.get((bench, np_, m), {}) for m in CONTENDED_MODES}
    out = {}
    for s in sorted(best["idle-native"]):
        # speedup(kind, busy, idle) = busy / idle for a time, idle / busy for a bandwidth
        sn = speedup(kind, best["busy-native"].get(s), best["idle-native"].get(s))
        sa = speedup(kind, best["busy-accl"].get(s), best["idle-accl"].get(s))
        out[s] = (sn, sa, max(sa, 1.0) / max(sn, 1.0) if sn and sa else None)
    return out


def rule_window(rule, key, top):
    lo, hi = rule.get(key, [0, None])
    return lo or 0, top if hi is None else hi


def table_offloads(table, call, ranks, nbytes):
    """What a tuning table (pmpi/tuning/*.json) decides for `call` (a rule's call name) on `ranks` ranks
    and `nbytes` bytes: the first rule that selects it, else the default (pmpi/src/tuning.cpp)."""
    group = "p2p" if call == "p2p" else "coll"
    for rule in table.get("rules", []):
        calls = rule["call"] if isinstance(rule["call"], list) else [rule["call"]]
        if call not in calls and group not in calls and "all" not in calls:
            continue
        rlo, rhi = rule_window(rule, "ranks", float("inf"))
        blo, bhi = rule_window(rule, "bytes", float("inf"))
        if rlo <= ranks <= rhi and (call in UNSIZED or blo <= nbytes <= bhi):
            return rule["use"] == "offload"
    return table.get("default", "native") == "offload"


def offloaded_sizes(table, bench, np_, sizes):
    """The OSU sizes of `bench` on np_ ranks that the table sends to the device."""
    if bench not in TUNING_CALLS:
        return []
    call, all_blocks = TUNING_CALLS[bench]
    return [s for s in sizes if table_offloads(table, call, np_, s * np_ if all_blocks else s)]


def tuning_speedups(measured, bench, np_):
    """{size: speedup} that accl-tune measured (pmpi/tuning/default.measured.json) for bench on np_ ranks: with
    several hosts (accl-tune --from-raw a,b) the smallest, which is what the table was decided on."""
    per_host = []
    for host in measured.get("hosts", [measured]):
        for cfg in host.get("configs", []):
            if cfg.get("bench") == bench and cfg.get("np") == np_:
                kind = "bw" if bench in ("bw", "bibw") else "lat"
                native, offload = cfg.get("native", {}), cfg.get("offload", {})
                per_host.append({int(s): speedup(kind, v, offload.get(s)) for s, v in native.items()})
    if not per_host:
        return {}
    sizes = set.intersection(*(set(h) for h in per_host))
    return {s: None if any(h[s] is None for h in per_host) else min(h[s] for h in per_host) for s in sorted(sizes)}


def tuning_holds(now, then):
    """Whether a default run's speedup `now` keeps the gain `then` measured at tuning time."""
    if now is None:
        return False
    return now >= 1.0 or (then is not None and now >= TUNING_KEEP * then)


def parse_stats(text):
    """The ACCL_STATS table (pmpi/src/stats.cpp) -> {MPI call: (calls, offloaded, native)}."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"\s*(MPI_\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\d+\s+\d+\s", line)
        if m:
            out[m.group(1)] = tuple(int(m.group(i)) for i in (2, 3, 4))
    return out

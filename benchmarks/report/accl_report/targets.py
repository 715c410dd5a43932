# SPDX-License-Identifier: Apache-2.0
"""The speed targets of the benchmarks issue, judged from this run's numbers."""

import statistics

from .common import fmt, human, speedup
from .parse import native_accl
from .runner import ALLOC_CALLS_PER_ROUND, size_range


# The speed targets of the benchmarks issue, checked against this run's numbers.
# (label, benchmark, message size, kind of limit, limit); "max_time_ratio":
# ACCL time / native time must not exceed the limit; "min_speedup": the ACCL
# speedup (native / ACCL time, or ACCL / native bandwidth) must reach it.
MPI_TARGETS = (
    [("8 B point-to-point latency", "latency", 8, "max_time_ratio", 2.0),
     ("bandwidth at 4 MiB", "bw", 4 << 20, "min_speedup", 0.8)] +
    [("allreduce %s" % human(1 << s), "allreduce", 1 << s, "min_speedup", 1.0) for s in range(20, 25)] +
    [("%s 1 MiB" % b, b, 1 << 20, "min_speedup", 0.8)
     for b in ("bcast", "reduce", "allgather", "reduce_scatter", "alltoall")] +
    # issue 40: the v forms, offloaded with equal blocks, at least as fast as native
    [("%s 1 MiB" % b, b, 1 << 20, "min_speedup", 1.0) for b in ("allgatherv", "gatherv", "scatterv", "alltoallv")])
TARGET_RANKS = (2, 4)
INTERPOSITION_MAX_IR = 150
MEMORY_MAX_EXTRA_KIB = 64 << 10


def target_ranges(args, benches):
    """{bench: (lo, hi)}: the sizes of the speed targets among `benches` that lie in this run's size range."""
    ranges = {}
    for _, bench, size, _, _ in MPI_TARGETS:
        lo, hi = size_range(args, bench)
        if bench not in benches or not lo <= size <= hi:
            continue
        have = ranges.get(bench)
        ranges[bench] = (min(have[0], size), max(have[1], size)) if have else (size, size)
    return ranges


def interposition_extra(cg, bench):
    """Wrapper-own instructions per call of the interposed run, or None."""
    itp = (cg.get(bench) or {}).get("interposed") or {}
    if "error" in itp or not itp.get("calls") or not itp.get("wrapped"):
        return None
    return (itp["incl"] - itp["inner"]) / itp["calls"]


def speed_targets(rec, cg, allocs=None):
    """Rows [target, ranks, measured, limit, verdict] for every target of the benchmarks issue."""
    rows = []
    for bench in ("latency", "allreduce"):
        extra = interposition_extra(cg, bench)
        rows.append(["pure interposition (%s), extra instructions per call" % (
                         "Send+Recv" if bench == "latency" else "Allreduce"), 2,
                     "–" if extra is None else "%.0f" % extra, "≤ %d" % INTERPOSITION_MAX_IR,
                     "not measured" if extra is None else ("MET" if extra <= INTERPOSITION_MAX_IR else "MISSED")])
    for label, bench, size, limit_kind, limit in MPI_TARGETS:
        for np_ in TARGET_RANKS:
            nb, ab = native_accl(rec.best, bench, np_, {})
            kind = rec.kind.get(bench, "bw" if bench in ("bw", "bibw") else "lat")
            sp = speedup(kind, nb.get(size), ab.get(size))
            if sp is None:
                rows.append([label, np_, "–", "", "not measured"])
                continue
            if limit_kind == "max_time_ratio":
                rows.append([label, np_, "%.2f× native time (%s vs %s µs)" % (1 / sp, fmt(ab[size], kind),
                                                                            fmt(nb[size], kind)),
                             "≤ %.1f×" % limit, "MET" if 1 / sp <= limit else "MISSED"])
            else:
                rows.append([label, np_, "%.2f× (%s vs %s %s)" % (sp, fmt(ab[size], kind), fmt(nb[size], kind),
                                                               "µs" if kind == "lat" else "MB/s"),
                             "≥ %.1f×" % limit, "MET" if sp >= limit else "MISSED"])
    worst = None
    for (bench, np_, mode), kib in rec.rss.items():
        if mode != "accl":
            continue
        native = rec.rss.get((bench, np_, "native"))
        if kib and native:
            extra = statistics.median(kib) - statistics.median(native)
            if worst is None or extra > worst[0]:
                worst = (extra, bench, np_)
    rows.append(["resident memory per rank over native (worst benchmark)", worst[2] if worst else "–",
                 "%+.0f KiB (%s)" % (worst[0], worst[1]) if worst else "–", "≤ +%d KiB" % MEMORY_MAX_EXTRA_KIB,
                 "not measured" if worst is None else ("MET" if worst[0] <= MEMORY_MAX_EXTRA_KIB else "MISSED")])
    label = "allocations per call on the data path (%d offloaded calls per round, after warm-up)" % \
        ALLOC_CALLS_PER_ROUND
    for np_ in TARGET_RANKS:
        got = (allocs or {}).get(np_)
        if not isinstance(got, tuple):
            rows.append([label, np_, "–" if got is None else "failed: %s" % got["error"], "< 1 per 10 rounds",
                         "not measured"])
            continue
        n, rounds = got
        rows.append([label, np_, "%d in %d rounds (worst rank)" % (n, rounds), "< 1 per 10 rounds",
                     "MET" if n * 10 < rounds else "MISSED"])
    return rows

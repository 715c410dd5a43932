# SPDX-License-Identifier: Apache-2.0
"""The outputs: results.csv and report.md with its sections."""

import csv
import math
import os
import platform
import shlex
import statistics
import sys

from .callgrind import RECV_PARTS, SEND_LAYERS
from .common import BENCHMARKS, SCALE_BENCHMARKS, fmt, g3, human, md_section, md_table, speedup
from .parse import native_accl
from .runner import ALLOC_PROGRAM, DEFAULT_MAX_SIZE, DEFAULT_MAX_SIZE_OTHERS, LADDER_RUNGS
from .targets import speed_targets
from .write_sections import md_contended, md_default


def md_hop_profile(L, hop):
    if not md_section(L, "## Where an offloaded 8 B hop spends its instructions (callgrind, 2 ranks)", hop, "hop"):
        return
    L.append("`osu_latency -m 8:8` offloaded (`LD_PRELOAD`, `ACCL_FALLBACK=error`), %d timed iterations, under "
             "`valgrind --tool=callgrind --toggle-collect=MPI_Send` and then `=MPI_Recv`, both ranks summed: "
             "instructions per `MPI_Send` (or `MPI_Recv`), inclusive. The send rows nest (each layer runs inside the "
             "one above it); *own* is a layer's cost minus that of the next layer seen (a layer with no calls, "
             "e.g. inlined, shows –). The receive's wait-loop rounds run more often under "
             "valgrind than natively, so its total is an upper bound; what matters there is the cost of one "
             "round, which bounds how soon an arrival is noticed." % hop["iters"])
    L.append("")
    md_hop_side(L, hop.get("send", {}), "MPI_Send", "send", hop_send_table)
    md_hop_side(L, hop.get("recv", {}), "MPI_Recv", "receive", hop_recv_table)


def md_hop_side(L, side, entry, what, table):
    """One side of the hop profile: its table (table(side, calls of entry)) and its counters per call, or why
    there is none."""
    if "error" in side or not side.get("calls"):
        L.append("_%s: %s_" % (what, side.get("error", "no %s calls seen" % entry)))
    else:
        n = side["calls"]
        L.append(table(side, n))
        L.append("")
        L.append("Per %s: " % entry + ", ".join("%.1f %s" % (v / n, k) for k, v in side["counters"].items()) + ".")
    L.append("")


def hop_send_table(send, n):
    # Inclusive Ir per send of each layer; None where no call was seen (e.g. inlined). No calls column:
    # callgrind's call counts of some edges here are twice the calls made (the driver's one device call per
    # send shows as two), while the inclusive costs add up.
    incls = [send["incl"] / n if prefix == "MPI_Send" else
             send["parts"][prefix][1] / n if send["parts"][prefix][0] else None for _, prefix in SEND_LAYERS]
    rows = []
    for i, (label, prefix) in enumerate(SEND_LAYERS):
        incl = incls[i]
        inner = next((v for v in incls[i + 1:] if v is not None), 0)
        rows.append([label, "`%s`" % prefix.rstrip("("), "%.0f" % incl if incl is not None else "–",
                     "%.0f" % (incl - inner) if incl is not None else "–"])
    return md_table(["MPI_Send, layer", "entry", "inclusive Ir/MPI_Send", "own Ir/MPI_Send"], rows)


def hop_recv_table(recv, n):
    rows = [["MPI_Recv in all", "`MPI_Recv`", "%.0f" % (recv["incl"] / n), "1", ""]]
    for label, prefix in RECV_PARTS:
        calls, incl = recv["parts"][prefix]
        rows.append([label, "`%s`" % prefix.rstrip("("), "%.0f" % (incl / n), "%.1f" % (calls / n),
                     "%.0f" % (incl / calls) if calls else "–"])
    return md_table(["MPI_Recv, part", "entry", "inclusive Ir/MPI_Recv", "calls/MPI_Recv", "Ir per call of it"], rows)


def md_latency_ladder(L, ladder):
    if not md_section(L, "## Latency by layer (2 ranks, 8 B, one way)", ladder, "ladder"):
        return
    best = ladder["best"]
    native = best.get("native")
    L.append("Two processes on this host, 8 B ping-pong; mean one-way time (round trip / 2, as osu_latency "
             "prints it), best of %d alternating runs of %d round trips each; `x native` = time / native MPI "
             "time. The ACCL layers are listed bottom up: each runs on the one before it, and the last column is "
             "what it adds to that one." % (ladder["runs"], ladder["iters"]))
    L.append("")
    rows = [["native Open MPI (osu_latency)", "%.3f" % native if native else "–", "1.00" if native else "–",
             ladder["errors"].get("native", "").replace("|", "/")]]
    below = None  # the rung under this one, if it was measured: a delta over a gap would credit two layers
    for rung, what in LADDER_RUNGS:
        v = best.get(rung)
        rows.append([what, "%.3f" % v if v is not None else "–",
                     "%.2f" % (v / native) if v is not None and native else "–",
                     "%+.3f" % (v - below) if v is not None and below is not None else
                     ladder["errors"].get(rung, "").replace("|", "/")])
        below = v
    L.append(md_table(["layer", "µs", "x native", "added by this layer (µs)"], rows))
    L.append("")


def write_csv(args, rec, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["benchmark", "ranks", "size_bytes", "metric", "unit", "native_best", "accl_best",
                    "accl_speedup", "native_runs_ok", "accl_runs_ok", "native_rss_kib", "accl_rss_kib"])
        for (bench, np_) in sorted({(b, n) for (b, n, _) in rec.runs}, key=lambda k: (k[1], list(BENCHMARKS).index(k[0]) if k[0] in BENCHMARKS else 99)):
            kind = rec.kind.get(bench, "lat")
            nb, ab = native_accl(rec.best, bench, np_, {})
            nr, ar = native_accl(rec.runs, bench, np_, [0, 0])
            nrss, arss = native_accl(rec.rss, bench, np_)
            for size in sorted(set(nb) | set(ab)):
                s = speedup(kind, nb.get(size), ab.get(size))
                w.writerow([bench, np_, size, "latency" if kind == "lat" else "bandwidth",
                            "us" if kind == "lat" else "MB/s", nb.get(size, ""), ab.get(size, ""),
                            "%.4f" % s if s else "", "%d/%d" % tuple(nr), "%d/%d" % tuple(ar),
                            int(statistics.median(nrss)) if nrss else "", int(statistics.median(arss)) if arss else ""])


def md_core_run(L, res, skipped, plot, args, plots):
    """Appends one accl-bench-core run (a run_core_bin result) to L: its command, plot-<plot>.png if that was
    made, and its output; or why it did not run (`skipped` when it was skipped by option). False if it did not."""
    if not res or "error" in res:
        L.append("_skipped: %s_" % res.get("error", skipped))
        return False
    L.append("`%s` (exit %d)" % (res["cmd"], res["rc"]))
    L.append("")
    if plot and os.path.join(args.out, "plot-%s.png" % plot) in plots:
        L.append("![%s](plot-%s.png)" % (plot, plot))
        L.append("")
    L.append("```")
    L.append(res["table"].rstrip())
    if res.get("err"):
        L.append(res["err"].rstrip())
    L.append("```")
    return True


def size_rows(bench, kind, nb, ab):
    """Table rows [size, native, ACCL, speedup] for the best values nb (native) and ab (ACCL) by size."""
    rows = []
    for s in sorted(set(nb) | set(ab)):
        rows.append([human(s) if bench != "barrier" else "–", fmt(nb.get(s), kind), fmt(ab.get(s), kind),
                     g3(speedup(kind, nb.get(s), ab.get(s)))])
    return rows


def md_summary(L, args, rec):
    L.append("## Summary")
    L.append("")
    srows = []
    for np_ in args.nps_all:
        for bench in BENCHMARKS:
            if (bench, np_, "native") not in rec.runs:
                continue
            kind = rec.kind.get(bench, "lat")
            nb, ab = native_accl(rec.best, bench, np_, {})
            sizes = sorted(set(nb) & set(ab))
            # A best value that printed as 0.00 has no ratio (speedup None).
            sizes = [s for s in sizes if speedup(kind, nb[s], ab[s]) is not None]
            if sizes:
                sp = [speedup(kind, nb[s], ab[s]) for s in sizes]
                big = sizes[-1]
                small = sizes[0]
                srows.append([bench, np_, "%s: %s" % (human(small), g3(sp[0])), "%s: %s" % (human(big), g3(sp[-1])),
                              g3(math.exp(sum(math.log(x) for x in sp) / len(sp))), "ok"])
            else:
                err = rec.errors.get((bench, np_, "accl")) or ("no ACCL run" if not args.pmpi_lib else "–")
                srows.append([bench, np_, "–", "–", "–", err.replace("|", "/")])
    L.append(md_table(["benchmark", "ranks", "speedup smallest size", "speedup largest size", "geo-mean speedup",
                       "ACCL status"], srows))
    L.append("")


def md_results(L, args, rec, plots):
    """Results by benchmark and the resident memory per rank."""
    L.append("## Results by benchmark")
    for bench in BENCHMARKS:
        keys = [np_ for np_ in args.nps_all if (bench, np_, "native") in rec.runs]
        if not keys:
            continue
        kind = rec.kind.get(bench, "lat")
        L.append("")
        L.append("### %s (%s)" % (bench, "µs, lower is better" if kind == "lat" else "MB/s, higher is better"))
        L.append("")
        if os.path.join(args.out, "plot-%s.png" % bench) in plots:
            L.append("![%s](plot-%s.png)" % (bench, bench))
            L.append("")
        for np_ in keys:
            nb, ab = native_accl(rec.best, bench, np_, {})
            nr, ar = native_accl(rec.runs, bench, np_, [0, 0])
            L.append("**%d ranks** — runs ok: native %d/%d, ACCL %d/%d%s" % (
                np_, nr[0], nr[1], ar[0], ar[1],
                ("; ACCL failure: `%s`" % rec.errors[(bench, np_, "accl")]) if (bench, np_, "accl") in rec.errors
                else ""))
            L.append("")
            L.append(md_table(["size", "native", "ACCL", "ACCL speedup"], size_rows(bench, kind, nb, ab)))
            L.append("")

    # memory
    L.append("## Resident memory per rank (VmHWM, KiB, median over runs)")
    L.append("")
    rows = []
    for np_ in args.nps_all:
        for bench in BENCHMARKS:
            n, a = native_accl(rec.rss, bench, np_)
            if not n and not a:
                continue
            nm = statistics.median(n) if n else None
            am = statistics.median(a) if a else None
            rows.append([bench, np_, "%.0f" % nm if nm else "–", "%.0f" % am if am else "–",
                         "%+.0f" % (am - nm) if nm and am else "–", "%.2f×" % (am / nm) if nm and am else "–"])
    L.append(md_table(["benchmark", "ranks", "native", "ACCL", "ACCL − native", "ratio"], rows) if rows else
             "_no RSS lines (external OSU binaries do not print them)_")
    L.append("")


def write_markdown(args, rec, cg, core, scaling, plots, started, path, profiles=(), allocs=None, ladder=None,
                   hop=None, default=None, contended=None):
    L = []
    L.append("# ACCL for MPI — performance report (%s)" % started.strftime("%Y-%m-%d %H:%M"))
    L.append("")
    L.append("Generated by `benchmarks/report/run_report.py` (%s)." % " ".join(shlex.quote(a) for a in sys.argv[1:]))
    L.append("")
    L.append("## Setup")
    L.append("")
    L.append("* host: %s, %d cores, %s" % (platform.node(), os.cpu_count() or 0, platform.platform()))
    L.append("* git: `%s`" % args.git_rev)
    L.append("* load average (1/5/15 min) at start %s, at end %s; niceness %d — on this 2-core VM other work "
             "shifts small-message and hand-off latencies a lot" % (
                 "/".join("%.1f" % x for x in args.load_start), "/".join("%.1f" % x for x in os.getloadavg()),
                 os.nice(0)))
    L.append("* MPI: %s" % args.mpi_version)
    L.append("* programs: `%s`%s" % (args.osu_bin_dir, " (user's OSU build)" if args.osu_dir else
                                     " (our OSU-style programs)"))
    L.append("* ACCL mode: `mpirun -x LD_PRELOAD=%s -x ACCL_FALLBACK=error%s` — a call that would fall back aborts "
             "the run, so every ACCL number below is offloaded work." % (
                 args.pmpi_lib or "(not built)", "".join(" -x %s=%s" % kv for kv in args.accl_env.items())))
    L.append("* each benchmark: %d repeats, native and ACCL runs alternating; best of each (min latency, max "
             "bandwidth) per size. Options: `%s` (largest size %s; collectives start at 4 B because the PMPI layer "
             "moves bytes as 32-bit device words and runs 1-2 B vectors natively)." % (
                 args.repeats, "-i %d -x %d%s" % (args.iters, args.warmup, " -c" if args.validate and not args.osu_dir
                                                  else ""), human(args.max_size) if args.max_size is not None else
                 ", ".join("%s %s" % (b, human(v)) for b, v in DEFAULT_MAX_SIZE.items()) + ", others " +
                 human(DEFAULT_MAX_SIZE_OTHERS)))
    if args.target_repeats:
        L.append("* speed targets: the sizes they are judged at (8 B latency, 4 MiB bandwidth, allreduce 1-16 MiB, "
                 "the other collectives 1 MiB; 2 and 4 ranks) get %d further alternating runs per mode of their own "
                 "(`-m` narrowed to them); their best counts with the %d above." % (args.target_repeats,
                                                                                     args.repeats))
    if default:
        L.append("* default settings section: `LD_PRELOAD` alone (the shipped tuning table decides what is "
                 "offloaded), sizes 1 B to %s, the options above, best of %d alternating runs" % (
                     human(args.default_max), args.repeats))
    if contended:
        L.append("* contended section: a busy loop per core during half of the runs; `-m 1:%s -i %d -x %d`, "
                 "at most %d s per run, best of %d alternating runs of each of the four kinds" % (
                     human(args.contended_max), args.contended_iters, args.contended_warmup,
                     args.contended_timeout, args.repeats))
    L.append("* mpirun: `%s -np N --oversubscribe %s`" % (args.mpirun, args.mpirun_args))
    L.append("* **ACCL speedup** = native time / ACCL time (latency) or ACCL MB/s / native MB/s (bandwidth): "
             "> 1 means ACCL is faster.")
    L.append("")
    if not args.pmpi_lib:
        L.append("> **libaccl_pmpi.so was not found: only native runs were made.**")
        L.append("")

    skip = getattr(args, "skip", set())
    if "osu" in skip:
        md_section(L, "## Summary", {}, "osu")
    else:
        md_summary(L, args, rec)
    if not {"osu", "callgrind", "alloc"} <= skip:
        L.append("## Speed targets")
        L.append("")
        L.append("The targets of the benchmarks issue, checked against the best values above (speedup as defined in "
                 "Setup; memory: median VmHWM per rank; interposition: callgrind section below; allocations: every "
                 "heap allocation (malloc, calloc, realloc, the aligned ones) of each rank, counted by "
                 "`tests/pmpi/alloc_counter.c` preloaded ahead of the layer while `%s` runs eager and rendezvous Send/Recv, Isend/Irecv, Allreduce, Bcast, Reduce, "
                 "Allgather and Alltoall of up to 1 MiB)." % ALLOC_PROGRAM)
        L.append("")
        L.append(md_table(["target", "ranks", "measured", "limit", "verdict"], speed_targets(rec, cg, allocs)))
        L.append("")
    if "osu" not in skip:
        md_results(L, args, rec, plots)
    md_default(L, args, default)
    md_contended(L, args, contended)

    # callgrind
    L.append("## Pure interposition cost (callgrind, ACCL_OFFLOAD=off vs native, 2 ranks, 8 B)")
    L.append("")
    if "error" in cg:
        L.append("_skipped: %s_" % cg["error"])
    elif not cg:
        L.append("_skipped_")
    else:
        L.append("Instructions are counted by `valgrind --tool=callgrind` on every rank of `mpirun -np 2` "
                 "(%d timed iterations). *Wrapper-own* = inclusive instructions of the interposed `MPI_X` minus "
                 "the inclusive instructions of the `PMPI_X` it calls, per call — pure interposition work, free of "
                 "the polling noise inside Open MPI. *Inclusive per call* compares the whole call natively and "
                 "interposed (includes polling, so it is noisy)." % args.callgrind_iters)
        L.append("")
        rows = []
        for bench, row in cg.items():
            nat = row.get("native", {})
            itp = row.get("interposed", {})
            calls = "MPI_Send+MPI_Recv" if bench == "latency" else "MPI_Allreduce"
            if "error" in nat or "error" in itp:
                rows.append([bench, calls, "–", "–", "–", (nat.get("error") or itp.get("error", "")).replace("|", "/")])
                continue
            n_pc = nat["incl"] / nat["calls"] if nat.get("calls") else None
            i_pc = itp["incl"] / itp["calls"] if itp.get("calls") else None
            own = (itp["incl"] - itp["inner"]) / itp["calls"] if itp.get("calls") and itp.get("wrapped") else None
            rows.append([bench, calls, "%.0f" % n_pc if n_pc else "–", "%.0f" % i_pc if i_pc else "–",
                         "**%.0f**" % own if own is not None else "–",
                         "" if itp.get("wrapped") or not itp else "interposed wrapper not seen in profile"])
        L.append(md_table(["benchmark", "calls", "native incl. Ir/call", "interposed incl. Ir/call",
                           "extra Ir/call (wrapper-own)", "note"], rows))
    L.append("")

    md_latency_ladder(L, ladder)
    md_hop_profile(L, hop)

    # core
    L.append("## In-process driver benchmark (accl-bench-core, no MPI)")
    L.append("")
    if md_core_run(L, core, "--skip core", "core", args, plots) and core.get("ops", {}).get("table"):
        L.append("")
        md_core_run(L, core["ops"], None, None, args, plots)
    L.append("")
    if profiles:
        L.append("### Where the time goes (missed targets)")
        L.append("")
        for p in profiles:
            L.append("**%s** — %s, `%s`" % (p["target"], p["tool"], p["cmd"]))
            L.append("")
            L.append("```")
            L.append(p["profile"])
            L.append("```")
            L.append("")

    # scale
    L.append("## Scale")
    L.append("")
    if args.scale_np:
        L.append("### MPI, %d ranks oversubscribed on %d cores" % (args.scale_np, os.cpu_count() or 0))
        L.append("")
        rows = []
        for bench in SCALE_BENCHMARKS:
            nb, ab = native_accl(rec.best, bench, args.scale_np, {})
            rows += [[bench] + r for r in size_rows(bench, rec.kind.get(bench, "lat"), nb, ab)]
            err = rec.errors.get((bench, args.scale_np, "accl"))
            if err:
                rows.append([bench, "ACCL failed", "", "", err.replace("|", "/")])
        L.append(md_table(["benchmark", "size", "native µs", "ACCL µs", "ACCL speedup"], rows) if rows else "_none_")
        L.append("")
    L.append("### In-process CCLOs vs the ring model")
    L.append("")
    md_core_run(L, scaling, "--skip scale", "scaling", args, plots)
    L.append("")
    L.append("## Files")
    L.append("")
    L.append("* `results.csv` — best native/ACCL value per benchmark, ranks and size")
    L.append("* `core.csv`, `core-ops.csv`, `core-scaling.csv` — accl-bench-core rows")
    L.append("* `logs/` — every command line with its full output (`stats-*.log`, `default-stats-*.log`: one "
             "ACCL_STATS=1 run per benchmark, offloaded and with the default settings)")
    L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))

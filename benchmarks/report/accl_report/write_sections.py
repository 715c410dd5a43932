# SPDX-License-Identifier: Apache-2.0
"""report.md's default-settings and contended sections (their numbers: sections.py)."""

import os

from .common import REPO, fmt, g3, human, md_section, md_table
from .sections import (CONTENDED_MAX_RATIO, CONTENDED_MODES, DEFAULT_MIN_SPEEDUP, TUNING_KEEP, at_least_everywhere,
                       at_most_everywhere, beyond_control, offloaded_sizes, slowdowns, speedups, tuning_holds,
                       tuning_speedups)


def size_label(bench, size):
    return "no size" if bench == "barrier" else human(size)


def sizes_text(bench, sizes):
    return ", ".join(size_label(bench, s) for s in sizes) or "–"


def failures(rec, bench, np_, modes):
    return "; ".join("%s: %s" % (m, rec.errors[(bench, np_, m)].replace("|", "/"))
                     for m in modes if (bench, np_, m) in rec.errors)


def device_calls(stats):
    """The calls an ACCL_STATS table shows on the device: 'MPI_X offloaded/calls', or none."""
    if not stats:
        return "–"
    on = ["%s %d/%d" % (call, off, calls) for call, (calls, off, _) in sorted(stats.items()) if off]
    return ", ".join(on) or "none"


def md_default(L, args, res):
    if not md_section(L, "## Default settings (LD_PRELOAD alone: the shipped tuning table decides)", res,
                      "default"):
        return
    rec, stats = res["rec"], res["stats"]
    L.append("What a user gets by preloading the layer and nothing else: no `ACCL_POLICY` (so `auto`, the tuning "
             "table `%s` decides per call, ranks and size), no `ACCL_FALLBACK`, no `--accl-env`. Each benchmark "
             "natively and under `LD_PRELOAD`, alternating, best of %d runs each, `-m 1:%s -i %d -x %d%s` (sizes "
             "that are no whole number of elements are skipped: reductions start at 4 B; barrier, which has no size, "
             "is in the verdicts only). **speedup** = native "
             "time / default time (bandwidth: default MB/s / native MB/s); target: **≥ %.1f at every size**. "
             "*Device calls*: the offloaded calls of one more run with `ACCL_STATS=1` (offloaded/all, summed "
             "over ranks; the programs' own bookkeeping calls included). *Control*: a second native arm in the same "
             "alternation (native / native2): how far two runs of native MPI alone drift apart under this protocol; "
             "*misses beyond the control*: sizes below the target where the default run also did worse than the "
             "second native run." % (
                 os.path.relpath(res["table_path"], REPO), args.repeats, human(args.default_max), args.iters,
                 args.warmup, " -c" if args.validate else "", DEFAULT_MIN_SPEEDUP))
    L.append("")
    for np_ in res["nps"]:
        benches = [b for b in res["benches"] if (b, np_, "native") in rec.runs]
        if not benches:
            continue
        by_bench = {b: speedups(rec, b, np_, "native", "default") for b in benches}
        sized = [b for b in benches if b != "barrier"]
        sizes = sorted({s for b in sized for s in by_bench[b]})
        L.append("### Speedup by size, %d ranks" % np_)
        L.append("")
        rows = [[human(s)] + [mark(by_bench[b].get(s), s in by_bench[b]) for b in sized] for s in sizes]
        L.append(md_table(["size"] + sized, rows))
        L.append("")
    L.append("### Verdicts")
    L.append("")
    rows = []
    for np_ in res["nps"]:
        for b in res["benches"]:
            if (b, np_, "native") not in rec.runs:
                continue
            by_size = speedups(rec, b, np_, "native", "default")
            verdict, worst, missing = at_least_everywhere(by_size, DEFAULT_MIN_SPEEDUP)
            control = speedups(rec, b, np_, "native", "native2") if (b, np_, "native2") in rec.runs else {}
            _, control_worst, _ = at_least_everywhere(control, DEFAULT_MIN_SPEEDUP)
            rows.append([b, np_, "%s at %s" % (g3(worst[1]), size_label(b, worst[0])) if worst else "–",
                         verdict, sizes_text(b, missing),
                         "%s at %s" % (g3(control_worst[1]), size_label(b, control_worst[0])) if control_worst
                         else "–",
                         sizes_text(b, beyond_control(by_size, control, DEFAULT_MIN_SPEEDUP)) if missing else "–",
                         device_calls(stats.get((b, np_))),
                         failures(rec, b, np_, ("native", "default", "native2")) or "ok"])
    L.append(md_table(["benchmark", "ranks", "min speedup", "speedup ≥ %.1f at every size" % DEFAULT_MIN_SPEEDUP,
                       "sizes that miss", "control: min native / native2", "misses beyond the control",
                       "device calls (ACCL_STATS)", "runs"], rows))
    L.append("")
    md_tuning_check(L, res)


def mark(value, measured):
    """A speedup cell: bold when it misses the default target, ✗ when the size has no default value."""
    if not measured:
        return ""
    if value is None:
        return "✗"
    return "**%s**" % g3(value) if value < DEFAULT_MIN_SPEEDUP else g3(value)


def md_tuning_check(L, res):
    rec, table, measured = res["rec"], res["table"], res["measured"]
    L.append("### Where the table offloads: does the tuning-time gain hold?")
    L.append("")
    if not table:
        L.append("_no tuning table read from `%s`_" % res["table_path"])
        L.append("")
        return
    L.append("Sizes of these runs that the table's rules send to the device (byte windows as `tools/accl-tune` "
             "writes them: all ranks' blocks for allgather, alltoall, gather, scatter and their v forms). "
             "*at tuning*: the speedup `accl-tune` measured (`*.measured.json`, ACCL_POLICY=offload vs native). "
             "It **holds** when today's default run keeps ≥ %.0f %% of it or is ≥ 1." % (TUNING_KEEP * 100))
    L.append("")
    rows, held = [], 0
    for np_ in res["nps"]:
        for b in res["benches"]:
            now = speedups(rec, b, np_, "native", "default")
            then = tuning_speedups(measured, b, np_)
            for s in offloaded_sizes(table, b, np_, sorted(now)):
                ok = tuning_holds(now[s], then.get(s))
                held += ok
                rows.append([b, np_, size_label(b, s), g3(now[s]), g3(then.get(s)), "yes" if ok else "**NO**"])
    if not rows:
        L.append("_The table offloads none of the sizes run here: every default run above is native MPI "
                 "behind the layer._")
    else:
        L.append(md_table(["benchmark", "ranks", "size", "speedup now (default)", "at tuning", "holds"], rows))
        L.append("")
        L.append("**%d of %d** offloaded sizes keep their gain." % (held, len(rows)))
    L.append("")


def md_contended(L, args, res):
    if not md_section(L, "## Contended (a busy loop on every core)", res, "contended"):
        return
    rec = res["rec"]
    L.append("%d busy-looping processes (one per core: `python3`, spinning until the run ends, started before "
             "and killed after each contended run) while the benchmarks run. Four kinds of run, alternating: "
             "idle native, idle ACCL (`ACCL_POLICY=offload ACCL_FALLBACK=error`), contended native, contended "
             "ACCL; best of %d each; `-m 1:%s -i %d -x %d%s`, at most %d s per run (a run that takes longer "
             "is killed and counts as failed). **slowdown** = contended time / idle time (bandwidth: idle MB/s "
             "/ contended MB/s); **ratio** = ACCL slowdown / native slowdown, a slowdown below 1 (faster under "
             "load: on a VM the busy loops keep the vCPUs from halting) taken as 1; target: **ratio ≤ %.0f at every "
             "size**." % (res["busy"], args.repeats, human(args.contended_max), args.contended_iters,
                          args.contended_warmup, " -c" if args.validate else "", args.contended_timeout,
                          CONTENDED_MAX_RATIO))
    L.append("")
    verdicts = []
    for np_ in res["nps"]:
        for b in res["benches"]:
            if (b, np_, "idle-native") not in rec.runs:
                continue
            kind = rec.kind.get(b, "lat")
            best = {m: rec.best.get((b, np_, m), {}) for m in CONTENDED_MODES}
            slow = slowdowns(rec, b, np_)
            L.append("### %s, %d ranks (%s)" % (b, np_, "µs" if kind == "lat" else "MB/s"))
            L.append("")
            rows = [[size_label(b, s)] + [fmt(best[m].get(s), kind) for m in CONTENDED_MODES] +
                    [g3(sn), g3(sa), mark_ratio(r)] for s, (sn, sa, r) in slow.items()]
            L.append(md_table(["size"] + CONTENDED_MODES + ["slowdown native", "slowdown ACCL", "ratio"], rows))
            L.append("")
            verdict, worst, missing = at_most_everywhere({s: v[2] for s, v in slow.items()}, CONTENDED_MAX_RATIO)
            verdicts.append([b, np_, "%s at %s" % (g3(worst[1]), size_label(b, worst[0])) if worst else "–",
                             verdict, sizes_text(b, missing), failures(rec, b, np_, CONTENDED_MODES) or "ok"])
    L.append("### Verdicts")
    L.append("")
    L.append(md_table(["benchmark", "ranks", "worst ratio", "ratio ≤ %.0f at every size" % CONTENDED_MAX_RATIO,
                       "sizes that miss", "runs"], verdicts))
    L.append("")


def mark_ratio(r):
    return "✗" if r is None else "**%s**" % g3(r) if r > CONTENDED_MAX_RATIO else g3(r)

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""One-command performance report: native Open MPI vs ACCL offload (PMPI layer).

For every OSU-style benchmark and rank count it runs the program natively and
under LD_PRELOAD=<build>/pmpi/libaccl_pmpi.so with ACCL_POLICY=offload ACCL_FALLBACK=error (a call
that would fall back aborts the run, so a fallback can never pass as offload),
alternating native and ACCL runs, and keeps the best of each over the repeats.
It then adds
  * pure-interposition cost: valgrind --tool=callgrind, ACCL_OFFLOAD=off vs
    native, 8 B latency and allreduce: extra instructions per call;
  * resident memory per rank (native vs ACCL) from the programs' VmHWM line;
  * latency by layer: 8 B one-way time of the shared-memory transport alone,
    of the driver API (accl-bench-pingpong) and of MPI under the PMPI
    layer, next to native MPI, alternating and best of the repeats;
  * the in-process driver benchmark (accl-bench-core) with its targets;
  * a scale section: 8 ranks oversubscribed, and accl-bench-core up to 16
    in-process CCLOs next to the ring model;
  * default settings: native vs LD_PRELOAD alone (the shipped tuning table
    decides), 1 B to 4 MiB, speedup >= 0.9 at every size, and whether the
    table's offloaded sizes keep the gain measured at tuning time;
  * contended: latency, bw and allreduce with a busy loop on every core,
    native and offloaded: the offloaded slowdown at most twice native's.
Outputs (in --out, default docs/report-<date>/): results.csv, report.md,
PNG plots, core*.csv and every raw log under logs/.

Usage: benchmarks/report/run_report.py [--build DIR] [--out DIR] [--quick] ...
See benchmarks/README.md and --help.
"""

import argparse
import datetime
import json
import os
import shutil
import sys

# The jobs live in the package next to this script (its directory is on sys.path when it runs).
from accl_report.callgrind import run_callgrind, run_hop_profile
from accl_report.common import BENCHMARKS, REPO, SCALE_BENCHMARKS, find_binary, log, mpi_env, parse_bytes, run
from accl_report.parse import Recorder
from accl_report.plots import ensure_plotter, plot_all
from accl_report.runner import (ALLOC_COUNTER, ALLOC_PROGRAM, build_programs, count_allocations, profile_missed,
                                run_core, run_core_scaling, run_latency_ladder, run_matrix, stats_run)
from accl_report.section_runs import run_contended, run_default
from accl_report.sections import CONTENDED_BENCHMARKS, DEFAULT_BENCHMARKS
from accl_report.targets import TARGET_RANKS, target_ranges
from accl_report.write import write_csv, write_markdown


# Every section --skip and --only know; PARTS come with their section under --only.
SECTIONS = ["osu", "alloc", "callgrind", "ladder", "hop", "core", "scale", "stats", "plots", "profile", "default",
            "contended"]
PARTS = {"plots": "osu", "stats": "osu", "profile": "core"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", help="meson build dir (default: build-bench, else build)")
    ap.add_argument("--out", help="output dir (default docs/report-<date>/)")
    ap.add_argument("--ranks", default="2,4", help="rank counts (default 2,4)")
    ap.add_argument("--repeats", type=int, default=5, help="runs per mode (default 5)")
    ap.add_argument("--target-repeats", type=int, default=5,
                    help="further runs per mode at the speed targets' sizes only (default 5; 0: none)")
    ap.add_argument("--benchmarks", default=",".join(BENCHMARKS), help="comma list (default all)")
    ap.add_argument("--osu-dir", help="directory with a user's OSU build (osu_latency, osu_allreduce, ...) to run "
                                      "instead of ours; searched recursively")
    ap.add_argument("--extra-bench", action="append", default=[], metavar="NAME=PATH",
                    help="also run another program that takes OSU's options (-m -i -x) and prints OSU columns "
                         "(repeatable), e.g. my_allreduce=/opt/osu/libexec/osu_allreduce")
    ap.add_argument("--pmpi-lib", help="libaccl_pmpi.so (default <build>/pmpi/libaccl_pmpi.so)")
    ap.add_argument("--core-bin", help="accl-bench-core (default <build>/benchmarks/core/accl-bench-core)")
    ap.add_argument("--max-size", type=parse_bytes, default=None,
                    help="largest message for every benchmark (default: latency, bw, bibw 4M, allreduce 16M, "
                         "the others 1M)")
    ap.add_argument("--min-size", type=parse_bytes, default=None,
                    help="smallest message (default: 0 latency, 1 bw/bibw, 4 collectives)")
    ap.add_argument("--iters", type=int, default=200, help="OSU -i (default 200)")
    ap.add_argument("--warmup", type=int, default=20, help="OSU -x (default 20)")
    ap.add_argument("--no-validate", dest="validate", action="store_false",
                    help="do not pass -c (default: -c on our programs; timings exclude checks)")
    ap.add_argument("--type", action="append", default=[], metavar="BENCH=TYPE",
                    help="-T for one benchmark, e.g. bcast=mpi_float (repeatable)")
    ap.add_argument("--accl-env", action="append", default=[], metavar="VAR=VALUE",
                    help="extra environment for ACCL runs (repeatable), e.g. ACCL_MIN_BYTES=0")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--mpirun-args", default="--bind-to none", help="extra mpirun arguments (default --bind-to none)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per run (default 600)")
    ap.add_argument("--scale-np", type=int, default=8, help="MPI scale section rank count (0 = skip; default 8)")
    ap.add_argument("--scale-ranks", default="2,4,8,16", help="accl-bench-core --scale-ranks (default 2,4,8,16)")
    ap.add_argument("--scale-sizes", default="1M,16M", help="accl-bench-core --scale-sizes (default 1M,16M)")
    ap.add_argument("--core-max", type=parse_bytes, default=64 << 20, help="accl-bench-core --max (default 64M)")
    ap.add_argument("--core-budget", type=float, default=0.2, help="accl-bench-core --budget (default 0.2)")
    ap.add_argument("--all-ops", action="store_true", help="also the core per-call sweeps (bcast, reduce, ...)")
    ap.add_argument("--callgrind-iters", type=int, default=2000, help="iterations under callgrind (default 2000)")
    ap.add_argument("--ladder-iters", type=int, default=20000,
                    help="round trips per run of the latency-by-layer section (default 20000)")
    ap.add_argument("--skip", default="", help="comma list of sections to skip: %s" % ",".join(SECTIONS))
    ap.add_argument("--only", default="",
                    help="comma list of the sections to run, all others skipped (plots and stats come with osu, "
                         "profile with core, unless --skip names them), e.g. default,contended")
    ap.add_argument("--default-benchmarks", default=",".join(DEFAULT_BENCHMARKS),
                    help="default-settings section's benchmarks (default %(default)s)")
    ap.add_argument("--default-max", type=parse_bytes, default=4 << 20,
                    help="default-settings section's largest size (default 4M; --quick 64K)")
    ap.add_argument("--contended-benchmarks", default=",".join(CONTENDED_BENCHMARKS),
                    help="contended section's benchmarks (default %(default)s)")
    ap.add_argument("--contended-max", type=parse_bytes, default=1 << 20,
                    help="contended section's largest size (default 1M; --quick 64K)")
    ap.add_argument("--contended-iters", type=int, default=50, help="contended section's -i (default 50)")
    ap.add_argument("--contended-warmup", type=int, default=5, help="contended section's -x (default 5)")
    ap.add_argument("--contended-timeout", type=int, default=300,
                    help="seconds per contended run; a run that takes longer is killed and counts as failed "
                         "(default 300)")
    ap.add_argument("--quick", action="store_true",
                    help="short run: sizes to 64K (default-settings and contended sections too), -i 50 -x 5 "
                         "(contended -i 20), core to 16M with budget 0.05, callgrind 500 iters, latency by layer "
                         "2000 round trips")
    ap.add_argument("--nice", type=int, default=0,
                    help="run everything at this niceness (negative needs root; on a shared machine -10 keeps "
                         "other work from distorting the numbers)")
    ap.add_argument("--no-install", action="store_true", help="never apt-get install a plotting tool")
    ap.add_argument("--no-build", action="store_true", help="do not run ninja for missing programs")
    ap.add_argument("--fail-fast-accl", action="store_true",
                    help="after a failed first ACCL run, skip that benchmark's remaining ACCL repeats")
    args = ap.parse_args()

    if args.quick:
        # Only what was left at its default changes.
        for name, quick in (("max_size", 64 << 10), ("iters", 50), ("warmup", 5), ("core_max", 16 << 20),
                            ("core_budget", 0.05), ("callgrind_iters", 500),
                            ("ladder_iters", 2000), ("default_max", 64 << 10), ("contended_max", 64 << 10),
                            ("contended_iters", 20)):
            if getattr(args, name) == ap.get_default(name):
                setattr(args, name, quick)
    if args.target_repeats < 0:
        ap.error("--target-repeats must be >= 0")
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    skip = set(filter(None, args.skip.split(",")))
    only = set(filter(None, args.only.split(",")))
    if not skip | only <= set(SECTIONS):
        ap.error("unknown section(s) %s (known: %s)" % (", ".join(sorted(skip | only - set(SECTIONS))),
                                                        ",".join(SECTIONS)))
    if only:
        skip |= set(SECTIONS) - only - {part for part, section in PARTS.items() if section in only}
    args.skip = skip
    args.type_overrides = dict(t.split("=", 1) for t in args.type)
    args.accl_env = dict(e.split("=", 1) for e in args.accl_env)

    started = datetime.datetime.now()
    args.load_start = os.getloadavg()
    if args.nice:
        try:
            os.nice(args.nice)
        except OSError as e:
            log("WARNING: cannot change niceness by %d: %s" % (args.nice, e))
    if args.build is None:
        for cand in ("build-bench", "build"):
            if os.path.isdir(os.path.join(REPO, cand)):
                args.build = os.path.join(REPO, cand)
                break
    if args.build is None:
        if args.no_build:
            ap.error("no build dir found; pass --build (or drop --no-build to set up build-bench)")
        args.build = os.path.join(REPO, "build-bench")
    args.build = os.path.abspath(args.build)
    args.out = os.path.abspath(args.out or os.path.join(REPO, "docs", "report-" + started.strftime("%Y-%m-%d")))
    args.logdir = os.path.join(args.out, "logs")
    os.makedirs(args.logdir, exist_ok=True)

    benches = [b for b in args.benchmarks.split(",") if b]
    extra = {}
    for e in args.extra_bench:
        if "=" not in e:
            ap.error("--extra-bench wants NAME=PATH")
        name, path = e.split("=", 1)
        if not os.access(path, os.X_OK):
            ap.error("--extra-bench %s: %s is not executable" % (name, path))
        extra[name] = os.path.abspath(path)
        BENCHMARKS.setdefault(name, ("lat", []))
        if name not in benches:
            benches.append(name)
    default_benches = [b for b in args.default_benchmarks.split(",") if b] if "default" not in skip else []
    contended_benches = [b for b in args.contended_benchmarks.split(",") if b] if "contended" not in skip else []
    for b in benches + default_benches + contended_benches:
        if b not in BENCHMARKS:
            ap.error("unknown benchmark %r (known: %s)" % (b, ", ".join(BENCHMARKS)))
    if "osu" in skip:
        benches = []

    # programs: a fresh clone gets a release build in build-bench; an existing
    # build is brought up to date (ninja does nothing when it is), so the
    # report never measures a stale libaccl_pmpi.so
    osu_build_dir = os.path.join(args.build, "benchmarks", "osu")
    want_targets = ["pmpi/libaccl_pmpi.so", "benchmarks/core/accl-bench-core", "benchmarks/core/accl-bench-pingpong"]
    if "alloc" not in skip:
        want_targets += [ALLOC_PROGRAM, ALLOC_COUNTER]
    programs = set(benches) | set(default_benches) | set(contended_benches) | set(SCALE_BENCHMARKS) | {
        "latency", "allreduce"}
    if not args.osu_dir:
        want_targets += ["benchmarks/osu/osu_" + b for b in sorted(programs - set(extra))]
    pmpi_default = os.path.join(args.build, "pmpi", "libaccl_pmpi.so")
    core_default = os.path.join(args.build, "benchmarks", "core", "accl-bench-core")
    if not args.no_build:
        build_programs(args.build, want_targets, args.logdir)
    args.osu_bin_dir = os.path.abspath(args.osu_dir) if args.osu_dir else osu_build_dir
    args.binaries = {}
    args.extra = extra
    for b in programs - set(extra):
        p = find_binary([args.osu_bin_dir], "osu_" + b)
        if p:
            args.binaries[b] = p
        elif b in benches or b in default_benches or b in contended_benches:
            log("WARNING: osu_%s not found under %s" % (b, args.osu_bin_dir))
    args.binaries.update(extra)
    args.pmpi_lib = os.path.abspath(args.pmpi_lib) if args.pmpi_lib else (
        pmpi_default if os.path.exists(pmpi_default) else None)
    if args.pmpi_lib and not os.path.exists(args.pmpi_lib):
        ap.error("--pmpi-lib %s does not exist" % args.pmpi_lib)
    if not args.pmpi_lib:
        log("WARNING: %s not found: native runs only" % pmpi_default)
    args.core_bin = args.core_bin or (core_default if os.path.exists(core_default) else None)
    args.mpirun = shutil.which(args.mpirun) or args.mpirun
    args.git_rev = run(["git", "-C", REPO, "describe", "--always", "--dirty"], timeout=30)[1].strip() or "?"
    mv = run([args.mpirun, "--version"], env=mpi_env(), timeout=30)[1].splitlines()
    args.mpi_version = mv[0] if mv else "?"
    ranks = [int(x) for x in args.ranks.split(",") if x]
    if "scale" in skip:
        args.scale_np = 0
    args.nps_all = ranks + ([args.scale_np] if args.scale_np and args.scale_np not in ranks else [])

    log("out: %s" % args.out)
    log("programs: %s; pmpi: %s; core: %s" % (args.osu_bin_dir, args.pmpi_lib, args.core_bin))
    plotter = None if "plots" in skip else ensure_plotter(not args.no_install)
    if plotter == "system-python":
        log("re-running under /usr/bin/python3, which has matplotlib")
        sys.stdout.flush()
        os.execv("/usr/bin/python3", ["/usr/bin/python3", os.path.abspath(__file__)] + sys.argv[1:])
    log("plotter: %s" % plotter)

    rec = Recorder()
    if "osu" not in skip:
        run_matrix(args, rec, benches, ranks, args.repeats, "osu")
    if args.scale_np and args.scale_np not in ranks:
        run_matrix(args, rec, [b for b in SCALE_BENCHMARKS if b in args.binaries], [args.scale_np], args.repeats,
                   "scale")
    # The targets' verdicts rest on the best of a few runs, and on this kind
    # of machine one noisy run more or less moves a ratio by 0.1-0.2: the
    # target sizes get further alternating runs of their own.
    targets = target_ranges(args, benches) if "osu" not in skip else {}
    target_nps = [np_ for np_ in ranks if np_ in TARGET_RANKS]
    if args.target_repeats and targets and target_nps:
        run_matrix(args, rec, list(targets), target_nps, args.target_repeats, "target", targets)
    if "stats" not in skip and "osu" not in skip:
        stats_run(args, benches, ranks[:1])
    allocs = {} if "alloc" in skip else count_allocations(args, ranks)
    cg = {} if "callgrind" in skip else run_callgrind(args)
    ladder = {} if "ladder" in skip else run_latency_ladder(args)
    hop = {} if "hop" in skip else run_hop_profile(args)
    core = {} if "core" in skip else run_core(args)
    scaling = {} if "scale" in skip else run_core_scaling(args)
    default = {} if "default" in skip else run_default(args, default_benches, ranks)
    contended = {} if "contended" in skip else run_contended(args, contended_benches, ranks)

    write_csv(args, rec, os.path.join(args.out, "results.csv"))
    plots = plot_all(args, rec, plotter, core, scaling)
    profiles = [] if "profile" in skip or "core" in skip else profile_missed(args, core)
    write_markdown(args, rec, cg, core, scaling, plots, started, os.path.join(args.out, "report.md"), profiles,
                   allocs, ladder, hop, default, contended)
    with open(os.path.join(args.out, "callgrind.json"), "w") as f:
        json.dump(cg if not hop else dict(cg, hop_profile=hop), f, indent=1)
    log("wrote %s (report.md, results.csv, %d plots) in %.0f s" % (
        args.out, len(plots), (datetime.datetime.now() - started).total_seconds()))
    accl_failed = [k for k in rec.errors if k[2] == "accl"]
    native_failed = [k for k in rec.errors if k[2] == "native"]
    if native_failed:
        log("native failures: %s" % ", ".join("%s np=%d" % (b, n) for b, n, _ in native_failed))
    if accl_failed:
        log("ACCL failures: %s" % ", ".join("%s np=%d" % (b, n) for b, n, _ in accl_failed))
    return 1 if native_failed else 0


if __name__ == "__main__":
    sys.exit(main())

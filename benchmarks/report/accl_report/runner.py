# SPDX-License-Identifier: Apache-2.0
"""Running the measurements: the OSU-style matrix (native and ACCL alternating), the ACCL_STATS runs,
the allocation count, accl-bench-core and its profiles, the latency by layer, and building the programs."""

import contextlib
import json
import os
import re
import shutil
import sys

from .common import REPO, accl_env_for, first_error_line, human, log, mpi_env, mpirun_cmd, run
from .parse import parse_allocations, parse_osu, parse_rung_mean, read_csv


# Largest message per benchmark when --max-size is not given: far enough to
# show every target of the speed issue (bandwidth at 4 MiB, allreduce to
# 16 MiB, the other collectives at 1 MiB) without spending the run's time on
# sizes nobody reads.
DEFAULT_MAX_SIZE = {"latency": 4 << 20, "bw": 4 << 20, "bibw": 4 << 20, "allreduce": 16 << 20}
DEFAULT_MAX_SIZE_OTHERS = 1 << 20


def max_size_for(args, bench):
    if args.max_size is not None:
        return args.max_size
    return DEFAULT_MAX_SIZE.get(bench, DEFAULT_MAX_SIZE_OTHERS)


def size_range(args, bench):
    """The message sizes (lo, hi) of a benchmark's runs."""
    # Collectives start at 4 B: the PMPI layer moves bytes as 32-bit device
    # words, so 1- and 2-byte vectors run natively by design (and would abort
    # the run under ACCL_FALLBACK=error). Point-to-point starts like OSU.
    lo = {"latency": 0, "bw": 1, "bibw": 1}.get(bench, 4)
    if args.min_size is not None:
        lo = args.min_size
    return lo, max_size_for(args, bench)


def osu_args(args, bench, sizes=None, iters=None, warmup=None):
    """OSU options of a run over the benchmark's size range, or over `sizes` (lo, hi) if given; -i and -x
    from args unless given."""
    lo, hi = sizes or size_range(args, bench)
    a = []
    if bench != "barrier":
        a += ["-m", "%d:%d" % (lo, hi)]
    a += ["-i", str(iters or args.iters), "-x", str(args.warmup if warmup is None else warmup)]
    if args.osu_dir is None and args.validate and bench not in args.extra:
        a += ["-c"]
    if bench in args.type_overrides:
        a += ["-T", args.type_overrides[bench]]
    return a


def run_matrix(args, rec, benches, nps, repeats, tag, ranges=None):
    """Alternating native/ACCL runs of each benchmark; `ranges` {bench: (lo, hi)} narrows the sizes."""
    modes = {"native": None}
    if args.pmpi_lib:
        modes["accl"] = accl_env_for(args)
    run_alternating(args, rec, benches, nps, repeats, tag, modes,
                    lambda bench: osu_args(args, bench, (ranges or {}).get(bench)))


def run_alternating(args, rec, benches, nps, repeats, tag, modes, bench_args, timeout=None, around=None):
    """Runs each benchmark in every mode of `modes` {mode: environment of the ranks or None}, `repeats` times,
    the order of the modes turning by one from repeat to repeat; records each run in `rec`.
    bench_args(bench): its options; around(mode): the context a run of that mode runs in (e.g. a busy machine)."""
    total = len(benches) * len(nps) * repeats * len(modes)
    n = 0
    for np_ in nps:
        for bench in benches:
            prog = args.binaries.get(bench)
            if prog is None:
                log("skip %s: no binary" % bench)
                continue
            pa = bench_args(bench)
            for rep in range(repeats):
                order = list(modes)
                order = order[rep % len(order):] + order[:rep % len(order)]  # alternate which mode goes first
                for mode in order:
                    n += 1
                    cmd = mpirun_cmd(args, np_, prog, pa, modes[mode])
                    lp = os.path.join(args.logdir, "%s-%s-np%d-%s-r%d.log" % (tag, bench, np_, mode, rep))
                    with (around(mode) if around else None) or contextlib.nullcontext():
                        rc, out, err, dt = run(cmd, env=mpi_env(), timeout=timeout or args.timeout, log_path=lp)
                    ok = rec.add(bench, np_, mode, rc, out, err, cmd)
                    what = bench if tag == "osu" else "%s %s" % (tag, bench)
                    log("[%d/%d] %-15s np=%d %-11s rep %d: %s (%.1f s)" % (
                        n, total, what, np_, mode, rep + 1, "ok" if ok else "FAILED " + rec.errors.get(
                            (bench, np_, mode), ""), dt))
                    if not ok and mode == "accl" and rep == 0 and args.fail_fast_accl:
                        break


def stats_run(args, benches, nps):
    """One ACCL_STATS=1 run per benchmark (evidence of what was offloaded), saved to logs/."""
    if not args.pmpi_lib:
        return
    for np_ in nps:
        for bench in benches:
            prog = args.binaries.get(bench)
            if prog is None:
                continue
            env = dict(accl_env_for(args), ACCL_STATS="1")
            cmd = mpirun_cmd(args, np_, prog, osu_args(args, bench), env)
            run(cmd, env=mpi_env(), timeout=args.timeout,
                log_path=os.path.join(args.logdir, "stats-%s-np%d.log" % (bench, np_)))


ALLOC_PROGRAM = "tests/pmpi/pmpi_test_alloc"
ALLOC_COUNTER = "tests/pmpi/libaccl_test_alloc_counter.so"
ALLOC_ROUNDS = 200
# One round of tests/pmpi/test_alloc.c per rank: Send+Recv three times (8 B
# inside the envelope, 32 KiB eager, 128 KiB rendezvous), Irecv+Isend+Waitall
# (128 KiB), and 5 collectives.
ALLOC_CALLS_PER_ROUND = 14


def count_allocations(args, nps):
    """{np: (allocations, rounds) or {"error": text}}: every malloc of each rank while it runs rounds of offloaded
    calls after a warm-up, counted by a preloaded counter (tests/pmpi/alloc_counter.c)."""
    prog = os.path.join(args.build, ALLOC_PROGRAM)
    counter = os.path.join(args.build, ALLOC_COUNTER)
    if not args.pmpi_lib or not os.path.exists(prog) or not os.path.exists(counter):
        log("allocation count: %s or %s not built; skipped" % (ALLOC_PROGRAM, ALLOC_COUNTER))
        return {}
    result = {}
    for np_ in nps:
        env = dict(accl_env_for(args), LD_PRELOAD=counter + ":" + args.pmpi_lib, ACCL_STATS="1")
        rc, out, err, _ = run(mpirun_cmd(args, np_, prog, [str(ALLOC_ROUNDS)], env), env=mpi_env(),
                           timeout=args.timeout, log_path=os.path.join(args.logdir, "alloc-np%d.log" % np_))
        counted = parse_allocations(out)
        result[np_] = counted if counted and rc == 0 else {"error": first_error_line(err, out) or "rc %d" % rc}
        log("allocation count np=%d: %s" % (np_, result[np_]))
    return result


def run_core_bin(args, what, name, core_args, timeout):
    """Runs accl-bench-core with core_args, its rows going to <name>.csv and its output to logs/<name>.log.
    -> {cmd, rc, table (stdout), err (stderr of a failed run), rows}."""
    csv_path = os.path.join(args.out, name + ".csv")
    cmd = [args.core_bin] + core_args + ["--budget", str(args.core_budget), "--csv", csv_path]
    rc, out, err, dt = run(cmd, env=mpi_env(), timeout=max(args.timeout, timeout),
                           log_path=os.path.join(args.logdir, name + ".log"))
    log("%s: rc=%d (%.0f s)" % (what, rc, dt))
    return {"cmd": " ".join(cmd), "rc": rc, "table": out, "err": err if rc != 0 else "", "rows": read_csv(csv_path)}


def run_core(args):
    if not args.core_bin:
        return {"error": "accl-bench-core not built"}
    res = run_core_bin(args, "accl-bench-core", "core", ["--ranks", "4", "--max", human(args.core_max)], 1800)
    if args.all_ops:
        res["ops"] = run_core_bin(args, "accl-bench-core ops sweep", "core-ops",
                                  ["--ranks", "4", "--ops", "bcast,reduce,allgather,reduce_scatter,alltoall",
                                   "--max", human(min(args.core_max, 16 << 20))], 1800)
    return res


def run_core_scaling(args):
    if not args.core_bin:
        return {"error": "accl-bench-core not built"}
    return run_core_bin(args, "accl-bench-core scaling", "core-scaling",
                        ["--only-scaling", "--scale-ranks", args.scale_ranks, "--scale-sizes", args.scale_sizes],
                        3600)


def profile_missed(args, core):
    """For each MISSED target of accl-bench-core: a flat profile (perf, else callgrind) of that case."""
    table = core.get("table") or ""
    missed = [l.strip() for l in table.splitlines() if l.strip().startswith("MISSED")]
    if not missed or not args.core_bin:
        return []
    cases = []
    for m in missed:
        if m.split()[1] == "copy":
            cases.append((m, ["--ops", "copy", "--min", "1M", "--max", "64M", "--step", "4"]))
        elif m.split()[1] == "allreduce":
            cases.append((m, ["--ops", "allreduce", "--min", "16M", "--max", "16M"]))
        elif m.split()[1] == "nop":
            cases.append((m, ["--ops", "nop", "--nop-iters", "50000"]))
    perf = shutil.which("perf")
    if perf and run([perf, "stat", "-e", "cpu-clock", "true"], timeout=60)[0] != 0:
        perf = None
    out = []
    for i, (what, cargs) in enumerate(cases):
        base = [args.core_bin, "--ranks", "4", "--budget", "1", "--no-check"] + cargs
        if perf:
            data = os.path.join(args.logdir, "perf-%d.data" % i)
            rc, so, se, _ = run([perf, "record", "-e", "cpu-clock", "-F", "1999", "-o", data, "--"] + base,
                                env=mpi_env(), timeout=1800, log_path=os.path.join(args.logdir, "perf-%d.log" % i))
            rep = run([perf, "report", "-i", data, "--no-children", "--sort", "comm,dso,symbol", "--stdio",
                       "--percent-limit", "0.7"], timeout=600)[1]
            lines = [re.sub(r"\s+-\s+-\s*$", "", re.sub(r" {3,}", "   ", l)).rstrip()
                     for l in rep.splitlines() if l.strip() and not l.startswith("#")]
            st = run([perf, "stat", "-e", "task-clock,context-switches,cpu-migrations,page-faults", "--"] + base,
                     env=mpi_env(), timeout=1800, log_path=os.path.join(args.logdir, "perf-stat-%d.log" % i))
            stat_lines = [l.rstrip() for l in st[2].splitlines()
                          if re.search(r"task-clock|context-switches|cpu-migrations|page-faults|elapsed|user|sys", l)]
            out.append({"target": what, "tool": "perf record -e cpu-clock (sampled CPU time, all threads)",
                        "cmd": " ".join(base), "profile": "\n".join(lines[:40] + ["", "perf stat:"] + stat_lines),
                        "rc": rc})
        elif shutil.which("valgrind"):
            cg = os.path.join(args.logdir, "profile-%d.callgrind" % i)
            rc, so, se, _ = run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + cg, args.core_bin,
                                 "--ranks", "4", "--budget", "0.05"] + cargs, env=dict(mpi_env(), ACCL_EMU_SPIN_US="0"),
                                timeout=3600, log_path=os.path.join(args.logdir, "profile-%d.log" % i))
            rep = run(["callgrind_annotate", cg], timeout=600)[1]
            out.append({"target": what, "tool": "callgrind (instructions, ACCL_EMU_SPIN_US=0)", "cmd": " ".join(base),
                        "profile": "\n".join(rep.splitlines()[:60]), "rc": rc})
    return out


# The rungs, bottom up: what each adds on the way from the wire to MPI_Recv.
LADDER_RUNGS = [
    ("transport", "shared-memory transport alone (accl-bench-pingpong --layer transport)"),
    ("driver", "ACCL driver API: send/recv through the emulated CCLO (accl-bench-pingpong --layer driver)"),
    ("mpi", "MPI_Send/MPI_Recv under libaccl_pmpi.so (osu_latency)"),
]


def run_latency_ladder(args):
    """8 B one-way latency of each layer and of native MPI, 2 ranks, alternating, best (lowest mean) of
    args.repeats runs each. -> {"iters", "runs", "best": {rung: µs}, "errors": {rung: text}}"""
    size, iters = 8, args.ladder_iters
    pingpong = os.path.join(args.build, "benchmarks", "core", "accl-bench-pingpong")
    prog = args.binaries.get("latency")
    res = {"iters": iters, "runs": args.repeats, "best": {}, "errors": {}}
    cmds = {}
    if os.path.exists(pingpong):
        for layer in ("transport", "driver"):
            # --accl-env reaches every ACCL layer, not only the top one
            cmds[layer] = ([pingpong, "--layer", layer, "--transport", "shm", "--sizes", str(size),
                            "--iters", str(iters)], dict(args.accl_env))
    else:
        res["errors"]["transport"] = res["errors"]["driver"] = "%s not built" % pingpong
    if prog:
        margs = ["-m", "%d:%d" % (size, size), "-i", str(iters), "-x", str(max(1, iters // 10))]
        cmds["native"] = (mpirun_cmd(args, 2, prog, margs), None)
        if args.pmpi_lib:
            cmds["mpi"] = (mpirun_cmd(args, 2, prog, margs, accl_env_for(args)), None)
        else:
            res["errors"]["mpi"] = "no libaccl_pmpi.so"
    else:
        res["errors"]["native"] = res["errors"]["mpi"] = "osu_latency not found"
    for rung, text in sorted(res["errors"].items()):
        log("latency by layer: %s skipped: %s" % (rung, text))
    for rep in range(args.repeats):
        for rung, (cmd, extra_env) in cmds.items():
            rc, out, err, _ = run(cmd, env=mpi_env(extra_env), timeout=args.timeout,
                                  log_path=os.path.join(args.logdir, "ladder-%s-%d.log" % (rung, rep)))
            if rung in ("native", "mpi"):
                value = parse_osu(out)[1].get(size) if rc == 0 else None
            else:
                value = parse_rung_mean(out, size) if rc == 0 else None
            if value is None:
                res["errors"].setdefault(rung, "exit %d: %s" % (rc, first_error_line(err, out)))
                continue
            res["best"][rung] = min(value, res["best"].get(rung, value))
    log("latency by layer: %s" % json.dumps(res["best"]))
    return res


def build_programs(build, targets, logdir):
    """Sets up `build` (release) when it does not exist, then builds `targets`."""
    if not os.path.exists(os.path.join(build, "build.ninja")):
        if not (shutil.which("meson") and shutil.which("ninja") and shutil.which("mpirun")):
            log("installing build dependencies (scripts/install-deps.sh)")
            rc, out, err, _ = run([os.path.join(REPO, "scripts", "install-deps.sh")], timeout=3600,
                                  log_path=os.path.join(logdir, "install-deps.log"))
            if rc != 0:
                sys.exit("install-deps.sh failed; see %s" % os.path.join(logdir, "install-deps.log"))
        log("setting up %s (release build)" % build)
        rc, out, err, _ = run(["meson", "setup", build, REPO, "--buildtype=release"], timeout=600,
                              log_path=os.path.join(logdir, "setup.log"))
        if rc != 0:
            sys.exit("meson setup failed; see %s" % os.path.join(logdir, "setup.log"))
    log("building %d programs in %s" % (len(targets), build))
    rc, out, err, _ = run(["ninja", "-C", build] + targets, timeout=3600, log_path=os.path.join(logdir, "build.log"))
    if rc != 0:
        sys.exit("build failed; see %s" % os.path.join(logdir, "build.log"))

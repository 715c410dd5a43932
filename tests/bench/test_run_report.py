#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The one-command report (benchmarks/report/run_report.py, its jobs in accl_report/) end to end, tiny.

1. Summary arithmetic: a size whose best value printed as 0.00 has no ratio
   and must not break the geometric mean (it crashed with math.log(None)).
2. Default size ranges reach every speed target (bw 4 MiB, allreduce 16 MiB,
   collectives 1 MiB); --max-size and --quick override them.
2b. The speed-target table judges each target from the measured numbers
   (met, missed, not measured; interposition and memory limits).
3. A real run on 2 ranks (latency, bw, allreduce; a few tiny sizes, one repeat
   each, native and under LD_PRELOAD with ACCL_FALLBACK=error): report.md and
   results.csv exist and every row has both a native and an ACCL value, so an
   ACCL run that aborted (e.g. a fallback) fails this test; the latency-by-layer
   section has a time and a ratio for native MPI and each of the three layers.
4. The offloaded hop's instruction profile from a small callgrind file: calls
   and inclusive cost per layer entry, recursion and look-alike names
   (MPI_Sendrecv) not counted, lock and clock counters, and the table's
   inclusive and own columns.

Usage: test_run_report.py <meson build dir> <source dir>
"""
import csv
import datetime
import importlib
import os
import re
import subprocess
import sys
import tempfile
import types


def load_report_package(source_dir):
    """-> (the report's package, benchmarks/report/accl_report, with its modules loaded; the script's path)."""
    report_dir = os.path.join(source_dir, "benchmarks", "report")
    sys.path.insert(0, report_dir)
    package = importlib.import_module("accl_report")
    for job in ("callgrind", "parse", "runner", "targets", "write"):
        importlib.import_module("accl_report." + job)
    return package, os.path.join(report_dir, "run_report.py")


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    print("ok:", what)


def summary_with_zero_best(rr, tmp):
    rec = rr.parse.Recorder()
    rec.kind["bibw"] = "bw"
    rec.runs[("bibw", 2, "native")] = [1, 1]
    rec.runs[("bibw", 2, "accl")] = [1, 1]
    rec.best[("bibw", 2, "native")] = {1: 0.0, 1024: 100.0}
    rec.best[("bibw", 2, "accl")] = {1: 0.5, 1024: 200.0}
    args = types.SimpleNamespace(
        nps_all=[2], repeats=1, iters=1, warmup=1, validate=True, osu_dir=None, max_size=None,
        mpirun="mpirun", mpirun_args="", pmpi_lib="libaccl_pmpi.so", accl_env={}, mpi_version="test",
        osu_bin_dir="/nowhere", load_start=(0, 0, 0), git_rev="test", out=tmp, callgrind_iters=1, scale_np=0,
        target_repeats=2)
    md = os.path.join(tmp, "zero.md")
    try:
        rr.write.write_markdown(args, rec, {}, {}, {}, {}, datetime.datetime.now(), md)
    except (TypeError, ValueError, AttributeError) as e:
        check(False, "write_markdown with a 0.00 best value: %r" % e)
    text = open(md).read()
    # Only 1024 B has a ratio (200/100 = 2): smallest, largest and geo-mean all say 2.
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| bibw | 2 |")]
    check(len(rows) >= 1 and rows[0][2:6] == ["1K: 2", "1K: 2", "2", "ok"],
          "summary row skips the size without a ratio: %s" % rows[:1])


def default_sizes(rr):
    args = types.SimpleNamespace(max_size=None)
    check(rr.runner.max_size_for(args, "bw") == 4 << 20, "bw reaches 4 MiB by default")
    check(rr.runner.max_size_for(args, "allreduce") == 16 << 20, "allreduce reaches 16 MiB by default")
    for bench in ("bcast", "reduce", "allgather", "reduce_scatter", "alltoall"):
        check(rr.runner.max_size_for(args, bench) >= 1 << 20, "%s reaches 1 MiB by default" % bench)
    args.max_size = 4096
    check(rr.runner.max_size_for(args, "allreduce") == 4096, "--max-size overrides")


def target_ranges(rr):
    args = types.SimpleNamespace(max_size=None, min_size=None, iters=10, warmup=1, validate=False, osu_dir=None,
                                 extra={}, type_overrides={})
    every = ("latency", "bw", "bibw", "allreduce", "bcast", "reduce", "allgather", "reduce_scatter", "alltoall",
             "alltoallv", "barrier")
    ranges = rr.targets.target_ranges(args, every)
    check(ranges == {"latency": (8, 8), "bw": (4 << 20, 4 << 20), "allreduce": (1 << 20, 16 << 20),
                     "bcast": (1 << 20, 1 << 20), "reduce": (1 << 20, 1 << 20), "allgather": (1 << 20, 1 << 20),
                     "reduce_scatter": (1 << 20, 1 << 20), "alltoall": (1 << 20, 1 << 20),
                     "alltoallv": (1 << 20, 1 << 20)},
          "every target size, one narrowed range per benchmark: %s" % ranges)
    check(rr.runner.osu_args(args, "allreduce", ranges["allreduce"])[:2] == ["-m", "%d:%d" % (1 << 20, 16 << 20)],
          "a target run asks for the target sizes only")
    args.max_size = 64
    check(rr.targets.target_ranges(args, every) == {"latency": (8, 8)}, "sizes outside --max-size are not run")
    check(rr.targets.target_ranges(args, ("bw", "barrier")) == {}, "only the benchmarks of this report")


def target_verdicts(rr):
    rec = rr.parse.Recorder()
    rec.kind.update({"latency": "lat", "bw": "bw", "allreduce": "lat"})
    rec.best[("latency", 2, "native")] = {8: 0.5}
    rec.best[("latency", 2, "accl")] = {8: 0.9}    # 1.8x native time: met
    rec.best[("latency", 4, "native")] = {8: 0.5}
    rec.best[("latency", 4, "accl")] = {8: 1.5}    # 3x: missed
    rec.best[("bw", 2, "native")] = {4 << 20: 1000.0}
    rec.best[("bw", 2, "accl")] = {4 << 20: 790.0}  # 0.79x: missed
    rec.best[("allreduce", 2, "native")] = {1 << 20: 100.0}
    rec.best[("allreduce", 2, "accl")] = {1 << 20: 100.0}  # equal: met
    rec.best[("allgatherv", 2, "native")] = {1 << 20: 100.0}
    rec.best[("allgatherv", 2, "accl")] = {1 << 20: 110.0}  # 0.91x: misses the v forms' >= 1x
    rec.best[("allgatherv", 4, "native")] = {1 << 20: 100.0}
    rec.best[("allgatherv", 4, "accl")] = {1 << 20: 50.0}  # 2x: met
    rec.rss[("bcast", 4, "native")] = [1000, 1000]
    rec.rss[("bcast", 4, "accl")] = [70000, 70000]   # +69000 KiB: missed
    rec.rss[("bw", 2, "native")] = [1000]
    rec.rss[("bw", 2, "accl")] = [2000]
    cg = {"latency": {"interposed": {"incl": 1300, "inner": 1000, "calls": 10, "wrapped": True}},
          "allreduce": {"interposed": {"error": "no run"}}}
    rows = {(r[0], r[1]): r for r in rr.targets.speed_targets(rec, cg)}
    verdict = lambda label, np_: rows[(label, np_)][4]
    check(verdict("8 B point-to-point latency", 2) == "MET", "1.8x native latency meets <= 2x")
    check(verdict("8 B point-to-point latency", 4) == "MISSED", "3x native latency misses")
    check(verdict("bandwidth at 4 MiB", 2) == "MISSED", "0.79x bandwidth misses >= 0.8x")
    check(verdict("allreduce 1M", 2) == "MET", "equal allreduce time meets >= 1x")
    check(verdict("allreduce 16M", 2) == "not measured", "a size that was not run is not measured")
    check((verdict("allgatherv 1 MiB", 2), verdict("allgatherv 1 MiB", 4)) == ("MISSED", "MET"),
          "offloaded allgatherv at 1 MiB: 0.91x misses >= 1x, 2x meets")
    check(verdict("scatterv 1 MiB", 4) == "not measured", "every v form has a target")
    check(verdict("pure interposition (Send+Recv), extra instructions per call", 2) == "MET",
          "30 extra instructions per call meet <= 150")
    check(verdict("pure interposition (Allreduce), extra instructions per call", 2) == "not measured",
          "a failed callgrind run is not measured")
    mem = [r for r in rows.values() if r[0].startswith("resident memory")]
    check(len(mem) == 1 and mem[0][4] == "MISSED" and "bcast" in mem[0][2], "worst RSS excess is judged: %s" % mem)
    alloc = [r for r in rows.values() if r[0].startswith("allocations per call")]
    check(len(alloc) == 2 and all(r[4] == "not measured" for r in alloc), "no allocation count: not measured")
    rows = {(r[0], r[1]): r for r in rr.targets.speed_targets(rec, cg, {2: (3, 200), 4: (40, 200)})}
    alloc = {r[1]: r[4] for r in rows.values() if r[0].startswith("allocations per call")}
    check(alloc == {2: "MET", 4: "MISSED"}, "3 in 200 rounds meet < 1 per 10 rounds, 40 miss: %s" % alloc)
    rows = {(r[0], r[1]): r for r in rr.targets.speed_targets(rec, cg, {2: {"error": "rc 1"}})}
    alloc = {r[1]: r[4] for r in rows.values() if r[0].startswith("allocations per call")}
    check(alloc == {2: "not measured", 4: "not measured"}, "a failed count is not measured: %s" % alloc)
    check(rr.parse.parse_allocations("rank 1: 7 allocations in 200 rounds of offloaded calls\n"
                               "rank 0: 2 allocations in 200 rounds of offloaded calls\n") == (7, 200),
          "the worst rank's count is parsed")
    check(rr.parse.parse_allocations("nothing here") is None, "no count lines: None")


def real_run(report, build, tmp):
    out = os.path.join(tmp, "report")
    cmd = [sys.executable, report, "--build", build, "--no-build", "--no-install", "--out", out,
           "--ranks", "2", "--repeats", "1", "--benchmarks", "latency,bw,allreduce",
           "--min-size", "8", "--max-size", "64", "--iters", "5", "--warmup", "1",
           "--skip", "callgrind,hop,core,scale,profile,plots,default,contended", "--timeout", "120",
           "--target-repeats", "1",
           "--ladder-iters", "500"]
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    print(proc.stdout[-4000:])
    check(proc.returncode == 0, "run_report.py exits 0")
    check(os.path.exists(os.path.join(out, "report.md")), "report.md written")
    with open(os.path.join(out, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    benches = {r["benchmark"] for r in rows}
    check(benches == {"latency", "bw", "allreduce"}, "results.csv has every benchmark: %s" % sorted(benches))
    for r in rows:
        check(r["native_best"] != "" and r["accl_best"] != "",
              "%s %s B: native and ACCL values" % (r["benchmark"], r["size_bytes"]))
        # latency's 8 B target lies in the range: one further run of each mode, at 8 B only.
        runs = "2/2" if r["benchmark"] == "latency" else "1/1"
        check(r["accl_runs_ok"] == runs and r["native_runs_ok"] == runs,
              "%s: every run succeeded (ACCL offloaded, no fallback), %s each" % (r["benchmark"], runs))
    with open(os.path.join(out, "report.md")) as f:
        report_text = f.read()
    ladder = report_text.split("## Latency by layer", 1)[-1].split("\n## ", 1)[0]
    ladder_rows = [line for line in ladder.splitlines() if line.startswith("| ") and "µs" not in line]
    measured = [line for line in ladder_rows if re.match(r"\| [^|]+ \| \d+\.\d+ \| \d+\.\d\d \|", line)]
    check("## Latency by layer" in report_text and len(measured) == 4,
          "latency by layer: native, transport, driver and MPI rows with a time and a ratio each: %s" % ladder_rows)
    if os.path.exists(os.path.join(build, "tests", "pmpi", "pmpi_test_alloc")):
        with open(os.path.join(out, "report.md")) as f:
            alloc = [line for line in f if line.startswith("| allocations per call")]
        check(len(alloc) == 2 and alloc[0].rstrip().endswith("| MET |") and "in 200 rounds" in alloc[0],
              "the report counted allocations on 2 ranks and found none per call: %s" % alloc)


def ladder_parsing(rr):
    out = ("# accl-bench-pingpong: driver layer over shm, two processes, one-way latency = round trip / 2\n"
           "     bytes   iters   median(us)      min(us)     mean(us)\n"
           "         8   20000        1.488        1.213        1.622\n"
           "      4096       -       FAILED\n")
    check(rr.parse.parse_rung_mean(out, 8) == 1.622, "latency by layer: the mean column of the 8 B row")
    check(rr.parse.parse_rung_mean(out, 4096) is None, "latency by layer: a FAILED row has no value")
    check(rr.parse.parse_rung_mean(out, 1024) is None, "latency by layer: a size not in the output has no value")
    L = []
    ladder = {"iters": 10, "runs": 1, "best": {"native": 0.5, "transport": 0.6, "mpi": 2.0},
              "errors": {"driver": "exit 1: boom"}}
    rr.write.md_latency_ladder(L, ladder)
    rows = [line for line in "\n".join(L).splitlines() if line.startswith("| ")]
    check(any("exit 1: boom" in r for r in rows) and rows[-1].rstrip().endswith("|  |"),
          "latency by layer: a failed rung shows its error and the next one claims no delta over it: %s" % rows)


HOP_CALLGRIND = """version: 1
events: Ir
ob=(1) /bin/osu_latency
fn=(1) main
cob=(2) /lib/libaccl_pmpi.so
cfn=(2) MPI_Send
calls=10 0
0 5000
cob=(2)
cfn=(6) MPI_Sendrecv
calls=1 0
0 999999
ob=(2)
fn=(2)
0 100
cob=(3) /lib/libaccl.so
cfn=(3) accl::ACCL::send(accl::BaseBuffer&, unsigned int)
calls=10 0
0 4000
ob=(3)
fn=(3)
cfn=(3)
calls=5 0
0 2000
cob=(4) /lib/libaccl_emu.so
cfn=(7) accl::emu::EmuDevice::start(accl::CallWords const&)
calls=10 0
0 3000
cob=(5) /lib/libc.so.6
cfn=(4) pthread_mutex_lock@@GLIBC_2.2.5
calls=20 0
0 300
cob=(5)
cfn=(11) ___pthread_mutex_lock
calls=4 0
0 60
cob=(5)
cfn=(5) clock_gettime@@GLIBC_2.17
calls=30 0
0 100
ob=(5)
fn=(5)
cfn=(12) __clock_gettime
calls=30 0
0 90
ob=(3)
fn=(3)
ob=(4)
fn=(7)
cfn=(8) accl::fw::ControlProgram::poll()
calls=10 0
0 2000
fn=(8)
cfn=(9) accl::emu::EmuDataPlane::move(accl::fw::Move const&)
calls=10 0
0 1000
fn=(9)
cfn=(10) accl::fw::ControlProgram::poll()'2
calls=1 0
0 500
totals: 5000
"""


def hop_profile(rr, tmp):
    path = os.path.join(tmp, "cg.hop-send.1")
    with open(path, "w") as f:
        f.write(HOP_CALLGRIND)
    prof = rr.callgrind.hop_profile_of([path, path], "MPI_Send", rr.callgrind.SEND_LAYERS)
    check(prof["calls"] == 20 and prof["incl"] == 10000,
          "hop profile: MPI_Send alone, over both rank files (MPI_Sendrecv not counted): %s" % prof)
    check(prof["parts"]["accl::ACCL::send("] == [20, 8000], "hop profile: the driver entry without its recursion")
    check(prof["parts"]["accl::emu::EmuDevice::start("] == [20, 6000], "hop profile: the device entry")
    check(prof["parts"]["accl::fw::ControlProgram::poll("] == [20, 4000],
          "hop profile: the firmware entry without its re-entry through the move (poll()'2)")
    check(prof["parts"]["accl::emu::LinkTable::send("] == [0, 0], "hop profile: a layer never called")
    check(prof["counters"] == {"mutex lock calls": 48, "clock reads": 60},
          "hop profile: counters, glibc aliases included, an alias reached through the public name not again: %s"
          % prof["counters"])
    recv = {"calls": 10, "incl": 5000, "counters": {"mutex lock calls": 30, "clock reads": 0},
            "parts": {"accl::ACCL::recv(": [10, 3000], "accl::pmpi::progress_locked(": [40, 1600],
                      "accl::pmpi::native_progress(": [0, 0]}}
    L = []
    rr.write.md_hop_profile(L, {"iters": 10, "send": prof, "recv": recv})
    text = "\n".join(L)
    rows = {r.split("|")[2].strip(): [c.strip() for c in r.split("|")[3:-1]]
            for r in text.splitlines() if r.startswith("| ") and "`" in r}
    check(rows.get("`MPI_Send`") == ["500", "100"] and rows.get("`accl::ACCL::send`") == ["400", "100"] and
          rows.get("`accl::emu::EmuDevice::start`") == ["300", "100"] and
          rows.get("`accl::fw::ControlProgram::poll`") == ["200", "100"] and
          rows.get("`accl::emu::EmuDataPlane::move`") == ["100", "100"] and
          rows.get("`accl::emu::LinkTable::send`") == ["–", "–"],
          "hop profile table: inclusive and own instructions per send, a missing layer skipped: %s" % rows)
    check(rows.get("`accl::pmpi::progress_locked`") == ["160", "4.0", "40"] and
          rows.get("`accl::pmpi::native_progress`") == ["0", "0.0", "–"],
          "hop profile: the receive's parts per MPI_Recv and per call of each: %s" % rows)
    check("2.4 mutex lock calls, 3.0 clock reads" in text and "3.0 mutex lock calls, 0.0 clock reads" in text,
          "hop profile: counters per call on both sides")
    L = []
    rr.write.md_hop_profile(L, {"iters": 10, "send": {"error": "exit 1, 1 profile files of 2: boom"}, "recv": {}})
    text = "\n".join(L)
    check("_send: exit 1, 1 profile files of 2: boom_" in text and "_receive: no MPI_Recv calls seen_" in text,
          "hop profile: a failed send run and an empty receive run are said so")


def main():
    build, source = sys.argv[1], sys.argv[2]
    rr, report = load_report_package(source)
    with tempfile.TemporaryDirectory() as tmp:
        summary_with_zero_best(rr, tmp)
        default_sizes(rr)
        target_ranges(rr)
        target_verdicts(rr)
        ladder_parsing(rr)
        hop_profile(rr, tmp)
        real_run(report, build, tmp)


if __name__ == "__main__":
    main()

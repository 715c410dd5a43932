#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The one-command report (benchmarks/report/run_report.py) end to end, tiny.

1. Summary arithmetic: a size whose best value printed as 0.00 has no ratio
   and must not break the geometric mean (it crashed with math.log(None)).
2. Default size ranges reach every speed target (bw 4 MiB, allreduce 16 MiB,
   collectives 1 MiB); --max-size and --quick override them.
3. A real run on 2 ranks (latency, bw, allreduce; a few tiny sizes, one repeat
   each, native and under LD_PRELOAD with ACCL_FALLBACK=error): report.md and
   results.csv exist and every row has both a native and an ACCL value, so an
   ACCL run that aborted (e.g. a fallback) fails this test.

Usage: test_run_report.py <meson build dir> <source dir>
"""
import csv
import importlib.util
import os
import subprocess
import sys
import tempfile
import types


def load_report_module(source_dir):
    path = os.path.join(source_dir, "benchmarks", "report", "run_report.py")
    spec = importlib.util.spec_from_file_location("run_report", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    print("ok:", what)


def summary_with_zero_best(rr, tmp):
    rec = rr.Recorder()
    rec.kind["bibw"] = "bw"
    rec.runs[("bibw", 2, "native")] = [1, 1]
    rec.runs[("bibw", 2, "accl")] = [1, 1]
    rec.best[("bibw", 2, "native")] = {1: 0.0, 1024: 100.0}
    rec.best[("bibw", 2, "accl")] = {1: 0.5, 1024: 200.0}
    args = types.SimpleNamespace(
        nps_all=[2], repeats=1, iters=1, warmup=1, validate=True, osu_dir=None, max_size=None,
        mpirun="mpirun", mpirun_args="", pmpi_lib="libaccl_pmpi.so", accl_env={}, mpi_version="test",
        osu_bin_dir="/nowhere", load_start=(0, 0, 0), git_rev="test", out=tmp, callgrind_iters=1, scale_np=0)
    md = os.path.join(tmp, "zero.md")
    try:
        rr.write_markdown(args, rec, {}, {}, {}, {}, rr.datetime.datetime.now(), md)
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
    check(rr.max_size_for(args, "bw") == 4 << 20, "bw reaches 4 MiB by default")
    check(rr.max_size_for(args, "allreduce") == 16 << 20, "allreduce reaches 16 MiB by default")
    for bench in ("bcast", "reduce", "allgather", "reduce_scatter", "alltoall"):
        check(rr.max_size_for(args, bench) >= 1 << 20, "%s reaches 1 MiB by default" % bench)
    args.max_size = 4096
    check(rr.max_size_for(args, "allreduce") == 4096, "--max-size overrides")


def real_run(report, build, tmp):
    out = os.path.join(tmp, "report")
    cmd = [sys.executable, report, "--build", build, "--no-build", "--no-install", "--out", out,
           "--ranks", "2", "--repeats", "1", "--benchmarks", "latency,bw,allreduce",
           "--min-size", "8", "--max-size", "64", "--iters", "5", "--warmup", "1",
           "--skip", "callgrind,core,scale,profile,plots", "--timeout", "120"]
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
        check(r["accl_runs_ok"] == "1/1", "%s ACCL run succeeded (offloaded, no fallback)" % r["benchmark"])


def main():
    build, source = sys.argv[1], sys.argv[2]
    rr, report = load_report_module(source)
    with tempfile.TemporaryDirectory() as tmp:
        summary_with_zero_best(rr, tmp)
        default_sizes(rr)
        real_run(report, build, tmp)


if __name__ == "__main__":
    main()

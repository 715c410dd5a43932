#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The report's default-settings and contended sections (benchmarks/report/accl_report/sections.py,
write_sections.py, busy.py) fed with made-up numbers: every verdict both ways, the tuning table's rules and
measurements, the ACCL_STATS table, the markdown with other sections absent, and that neither the busy
loops nor a run that timed out leave a process behind.

Usage: test_report_sections.py <source dir>
"""
import datetime
import os
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_run_report import check, load_report_package  # noqa: E402


def recorder(rr, kind, best):
    """A Recorder holding best values {(bench, np, mode): {size: value}}, every run ok."""
    rec = rr.parse.Recorder()
    for (bench, np_, mode), values in best.items():
        rec.kind[bench] = kind
        rec.runs[(bench, np_, mode)] = [1, 1]
        rec.best[(bench, np_, mode)] = values
    return rec


def default_verdicts(rr):
    s = rr.sections
    rec = recorder(rr, "lat", {("allreduce", 2, "native"): {4: 1.0, 1024: 2.0, 1 << 20: 100.0},
                               ("allreduce", 2, "default"): {4: 1.05, 1024: 2.0, 1 << 20: 50.0},
                               ("allreduce", 4, "native"): {4: 1.0, 1024: 2.0, 1 << 20: 100.0},
                               ("allreduce", 4, "default"): {4: 1.25, 1024: 2.0}})
    sp = s.speedups(rec, "allreduce", 2, "native", "default")
    check(sp == {4: 1.0 / 1.05, 1024: 1.0, 1 << 20: 2.0}, "speedup per size: native / default time: %s" % sp)
    verdict, worst, missing = s.at_least_everywhere(sp, s.DEFAULT_MIN_SPEEDUP)
    check((verdict, worst[0], missing) == ("MET", 4, []), "0.95 at worst meets >= 0.9 at every size")
    verdict, worst, missing = s.at_least_everywhere(s.speedups(rec, "allreduce", 4, "native", "default"), 0.9)
    check((verdict, worst, missing) == ("MISSED", (4, 0.8), [4, 1 << 20]),
          "0.8 at 4 B and no default value at 1 MiB miss, both listed: %s %s %s" % (verdict, worst, missing))
    check(s.at_least_everywhere({}, 0.9)[0] == "not measured", "no sizes: not measured")
    control = {4: 0.95, 1024: 0.7}
    check(s.beyond_control({4: 0.8, 1024: 0.8, 2048: 0.85, 4096: None}, control, 0.9) == [4, 2048, 4096],
          "beyond the control: below the target and below the second native run (4 B), or no control value "
          "(2 KiB), or no value (4 KiB); not 1 KiB, where native itself drifted to 0.7")
    bw = recorder(rr, "bw", {("bw", 2, "native"): {1: 10.0}, ("bw", 2, "default"): {1: 8.0}})
    check(s.speedups(bw, "bw", 2, "native", "default") == {1: 0.8}, "bandwidth speedup: default / native MB/s")


def contended_verdicts(rr):
    s = rr.sections
    rec = recorder(rr, "lat", {("latency", 2, "idle-native"): {1: 1.0, 8: 1.0, 64: 1.0},
                               ("latency", 2, "busy-native"): {1: 4.0, 8: 4.0, 64: 4.0},
                               ("latency", 2, "idle-accl"): {1: 2.0, 8: 2.0, 64: 2.0},
                               ("latency", 2, "busy-accl"): {1: 16.0, 8: 18.0}})
    slow = s.slowdowns(rec, "latency", 2)
    check(slow[1] == (4.0, 8.0, 2.0) and slow[8] == (4.0, 9.0, 2.25) and slow[64] == (4.0, None, None),
          "slowdown = contended / idle time, ratio = ACCL / native: %s" % slow)
    verdict, worst, missing = s.at_most_everywhere({k: v[2] for k, v in slow.items()}, s.CONTENDED_MAX_RATIO)
    check((verdict, worst, missing) == ("MISSED", (8, 2.25), [8, 64]),
          "ratio 2.25 and a failed contended run miss <= 2: %s %s %s" % (verdict, worst, missing))
    verdict, worst, missing = s.at_most_everywhere({1: 2.0, 8: 1.5}, s.CONTENDED_MAX_RATIO)
    check((verdict, worst, missing) == ("MET", (1, 2.0), []), "ratios 2.0 and 1.5 meet <= 2")
    bw = recorder(rr, "bw", {("bw", 2, "idle-native"): {4096: 1000.0}, ("bw", 2, "busy-native"): {4096: 500.0},
                             ("bw", 2, "idle-accl"): {4096: 2000.0}, ("bw", 2, "busy-accl"): {4096: 250.0}})
    check(s.slowdowns(bw, "bw", 2) == {4096: (2.0, 8.0, 4.0)}, "bandwidth slowdown: idle / contended MB/s")
    faster = recorder(rr, "lat", {("latency", 2, "idle-native"): {8: 2.0, 64: 2.0},
                                  ("latency", 2, "busy-native"): {8: 1.0, 64: 1.0},
                                  ("latency", 2, "idle-accl"): {8: 1.0, 64: 1.0},
                                  ("latency", 2, "busy-accl"): {8: 0.9, 64: 2.5}})
    check(s.slowdowns(faster, "latency", 2) == {8: (0.5, 0.9, 1.0), 64: (0.5, 2.5, 2.5)},
          "a slowdown below 1 (faster under load) counts as 1 in the ratio: %s" % s.slowdowns(faster, "latency", 2))


def tuning(rr):
    s = rr.sections
    table = {"default": "native", "rules": [
        {"call": ["allgather", "iallgather"], "ranks": [4, 4], "bytes": [32768, 4194304], "use": "offload"},
        {"call": ["allreduce"], "ranks": [2, 2], "bytes": [16384, None], "use": "offload"},
        {"call": "coll", "ranks": [3, 3], "bytes": [0, 8], "use": "native"},
        {"call": "coll", "ranks": [3, 3], "use": "offload"},
        {"call": ["barrier"], "ranks": [4, 4], "use": "offload"},
        {"call": ["p2p"], "ranks": [2, 2], "use": "offload"}]}
    sizes = [1 << k for k in range(0, 23)]
    check(s.offloaded_sizes(table, "allgather", 4, sizes) == [1 << k for k in range(13, 21)],
          "allgather's rule counts all ranks' blocks: 8 KiB x 4 ranks to 1 MiB x 4")
    check(s.offloaded_sizes(table, "allreduce", 2, sizes) == [1 << k for k in range(14, 23)],
          "an open window reaches every larger size")
    check(s.offloaded_sizes(table, "bcast", 3, sizes) == [1 << k for k in range(4, 23)],
          "rules apply in order: the native window of the coll group first, then its offload rule")
    check(s.offloaded_sizes(table, "bcast", 4, sizes) == [], "no rule for 4 ranks: the default, native")
    check(s.offloaded_sizes(table, "barrier", 4, [0]) == [0] and s.offloaded_sizes(table, "latency", 2, [1, 8])
          == [1, 8], "barrier and point-to-point rules hold for every size")
    check(s.offloaded_sizes(dict(table, default="offload"), "scan", 4, [4]) == [4], "default offload")
    measured = {"configs": [{"bench": "allreduce", "np": 2, "native": {"16384": 30.0, "32768": 50.0},
                             "offload": {"16384": 20.0, "32768": 25.0}},
                            {"bench": "bw", "np": 2, "native": {"8": 100.0}, "offload": {"8": 150.0}}]}
    check(s.tuning_speedups(measured, "allreduce", 2) == {16384: 1.5, 32768: 2.0}, "tuning-time speedups")
    check(s.tuning_speedups(measured, "bw", 2) == {8: 1.5}, "tuning-time bandwidth speedup")
    check(s.tuning_speedups(measured, "allreduce", 4) == {}, "no measurement for 4 ranks")
    other = {"configs": [{"bench": "allreduce", "np": 2, "native": {"16384": 30.0, "32768": 30.0},
                          "offload": {"16384": 10.0, "32768": 25.0}}]}
    check(s.tuning_speedups({"hosts": [measured, other]}, "allreduce", 2) == {16384: 1.5, 32768: 1.2},
          "several hosts: the smallest speedup at each size")
    check(s.tuning_holds(1.8, 2.0) and s.tuning_holds(1.0, 3.0) and s.tuning_holds(0.95, 1.0),
          "the gain holds at >= 90 % of the tuning-time speedup, or >= 1")
    check(not s.tuning_holds(0.95, 1.2) and not s.tuning_holds(0.85, None) and not s.tuning_holds(None, 1.2),
          "it does not below both, or without a default value")


STATS = """[accl-pmpi] ACCL_STATS (summed over 2 ranks; device emu; MPI thread level single, layer lock off, progress thread off)
call                            calls  offloaded     native  bytes offload   bytes native  ms offload   ms native  native by reason
MPI_Allreduce                     440        200        240        8388608           5280      12.500       0.300  policy: 240
MPI_Barrier                       460          0        460              0              0       0.000       1.200  policy: 460
"""


def stats(rr):
    got = rr.sections.parse_stats(STATS)
    check(got == {"MPI_Allreduce": (440, 200, 240), "MPI_Barrier": (460, 0, 460)}, "ACCL_STATS rows: %s" % got)
    check(rr.write_sections.device_calls(got) == "MPI_Allreduce 200/440", "device calls: only offloaded ones")
    check(rr.write_sections.device_calls({"MPI_Barrier": (4, 0, 4)}) == "none" and
          rr.write_sections.device_calls({}) == "–", "nothing offloaded / no stats run")


def markdown(rr, tmp):
    s = rr.sections
    default = recorder(rr, "lat", {("allreduce", 2, "native"): {4: 1.0, 1 << 20: 100.0},
                                   ("allreduce", 2, "default"): {4: 1.0, 1 << 20: 125.0},
                                   ("allreduce", 2, "native2"): {4: 1.0, 1 << 20: 130.0},
                                   ("alltoall", 2, "native"): {4: 1.0},
                                   ("alltoall", 2, "default"): {4: 0.5}})
    contended = recorder(rr, "lat", {("latency", 2, m): {8: v} for m, v in
                                     zip(s.CONTENDED_MODES, (1.0, 2.0, 3.0, 5.0))})
    contended.errors[("latency", 2, "busy-accl")] = "exit 124: [report] TIMEOUT after 5 s"
    args = types.SimpleNamespace(
        nps_all=[2], repeats=1, iters=1, warmup=1, validate=True, osu_dir=None, max_size=None, mpirun="mpirun",
        mpirun_args="", pmpi_lib="libaccl_pmpi.so", accl_env={}, mpi_version="test", osu_bin_dir="/nowhere",
        load_start=(0, 0, 0), git_rev="test", out=tmp, callgrind_iters=1, scale_np=0, target_repeats=0,
        skip={"osu", "callgrind", "alloc", "ladder", "hop", "core", "scale"}, default_max=1 << 20,
        contended_max=64, contended_iters=5, contended_warmup=1, contended_timeout=5)
    table = {"rules": [{"call": ["allreduce"], "ranks": [2, 2], "bytes": [1 << 20, None], "use": "offload"}]}
    measured = {"configs": [{"bench": "allreduce", "np": 2, "native": {str(1 << 20): 90.0},
                             "offload": {str(1 << 20): 30.0}}]}
    res_default = {"rec": default, "stats": {("allreduce", 2): {"MPI_Allreduce": (40, 10, 30)}},
                   "benches": ["allreduce", "alltoall"], "nps": [2], "table": table, "measured": measured,
                   "table_path": os.path.join(rr.common.REPO, "pmpi", "tuning", "default.json")}
    res_contended = {"rec": contended, "busy": 2, "benches": ["latency"], "nps": [2]}
    md = os.path.join(tmp, "sections.md")
    rr.write.write_markdown(args, rr.parse.Recorder(), {}, {}, {}, {}, datetime.datetime.now(), md,
                            default=res_default, contended=res_contended)
    text = open(md).read()
    rows = {}  # the first table row of each (benchmark, ranks): the default verdicts come before the tuning check
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| "):
            rows.setdefault(tuple(cells[:2]), cells)
    check("## Summary\n\n_skipped (--skip osu" in text and "## Results by benchmark" not in text and
          "## Speed targets" not in text, "the OSU sections say they were skipped, nothing else of them")
    check(rows[("allreduce", "2")][2:9] == ["0.8 at 1M", "MISSED", "1M", "0.769 at 1M", "–", "MPI_Allreduce 10/40",
                                            "ok"],
          "default verdict: 0.8 at 1 MiB misses, but a second native run drifted further (0.769): no miss beyond "
          "the control; the device calls of the stats run: %s" % rows[("allreduce", "2")])
    check(rows[("alltoall", "2")][2:8] == ["2 at 4", "MET", "–", "–", "–", "–"],
          "default verdict: 2x at 4 B meets, no control run: %s" % rows[("alltoall", "2")])
    check("| 1M | **0.8** |  |" in text, "the size table marks a miss and leaves a size not run empty")
    check("| allreduce | 2 | 1M | 0.8 | 3 | **NO** |" in text,
          "an offloaded size at 0.8x where tuning measured 3x: the gain does not hold")
    check("**0 of 1** offloaded sizes keep their gain" in text, "the tuning check's count")
    check("| latency | 2 | 0.833 at 8 | MET | – | busy-accl: exit 124: [report] TIMEOUT after 5 s |" in text,
          "contended verdict (5/2 over 3/1 = 0.833), a timed-out run listed as failed")
    L = []
    rr.write_sections.md_default(L, args, {})
    rr.write_sections.md_contended(L, args, {"error": "no libaccl_pmpi.so"})
    text = "\n".join(L)
    check("_skipped (--skip default, or not in --only)_" in text and "_skipped: no libaccl_pmpi.so_" in text,
          "absent sections say why")


def gone(pid):
    """True once pid no longer exists (or is a zombie that no one will reap in time)."""
    for _ in range(50):
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


def busy_loops(rr):
    with rr.busy.BusyLoad(3) as load:
        pids = load.pids()
        time.sleep(0.3)
        check(len(pids) == 3 and not any(gone_now(p) for p in pids), "three busy loops run inside the block")
    check(all(gone(p) for p in pids), "the busy loops are gone after the block")
    try:
        with rr.busy.BusyLoad(2) as load:
            pids = load.pids()
            raise TimeoutError("a run took too long")
    except TimeoutError:
        pass
    check(all(gone(p) for p in pids), "the busy loops are gone after an exception in the block")
    rc, out, err, _ = rr.common.run(["sh", "-c", "sleep 60 & echo $!; wait"], timeout=1)
    check(rc == 124 and "TIMEOUT" in err and out.strip().isdigit() and gone(int(out.strip())),
          "a run that times out returns 124 and its children are killed too")


def gone_now(pid):
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True


def main():
    rr, _ = load_report_package(sys.argv[1])
    for job in ("busy", "common", "sections", "write_sections"):
        __import__("accl_report." + job)
    default_verdicts(rr)
    contended_verdicts(rr)
    tuning(rr)
    stats(rr)
    with tempfile.TemporaryDirectory() as tmp:
        markdown(rr, tmp)
    busy_loops(rr)


if __name__ == "__main__":
    main()

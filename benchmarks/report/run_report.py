#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""One-command performance report: native Open MPI vs ACCL offload (PMPI layer).

For every OSU-style benchmark and rank count it runs the program natively and
under LD_PRELOAD=<build>/pmpi/libaccl_pmpi.so with ACCL_FALLBACK=error (a call
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
    in-process CCLOs next to the ring model.
Outputs (in --out, default docs/report-<date>/): results.csv, report.md,
PNG plots, core*.csv and every raw log under logs/.

Usage: benchmarks/report/run_report.py [--build DIR] [--out DIR] [--quick] ...
See benchmarks/README.md and --help.
"""

import argparse
import csv
import datetime
import importlib
import json
import math
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

# name -> (kind, default extra args). kind: "lat" (µs, lower is better) or "bw" (MB/s, higher is better).
BENCHMARKS = {
    "latency": ("lat", []),
    "bw": ("bw", []),
    "bibw": ("bw", []),
    "allreduce": ("lat", []),
    "bcast": ("lat", []),
    "reduce": ("lat", []),
    "allgather": ("lat", []),
    "gather": ("lat", []),
    "scatter": ("lat", []),
    "reduce_scatter": ("lat", []),
    "alltoall": ("lat", []),
    "barrier": ("lat", []),
}
PT2PT = {"latency", "bw", "bibw"}
SCALE_BENCHMARKS = ["allreduce", "bcast", "alltoall", "barrier"]


def log(msg):
    print("[report] " + msg, flush=True)


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------
def human(n):
    n = int(n)
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)


def parse_bytes(text):
    m = re.fullmatch(r"(\d+)([KkMmGg]?)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError("bad size %r" % text)
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


def run(cmd, env=None, timeout=600, log_path=None):
    """Runs cmd; returns (rc, stdout, stderr, seconds). Never raises on failure."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = 124
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or ""))
        err += "\n[report] TIMEOUT after %d s\n" % timeout
    except OSError as e:
        rc, out, err = 127, "", str(e)
    dt = time.time() - t0
    if log_path:
        with open(log_path, "w") as f:
            f.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
            f.write("# rc=%d, %.1f s\n" % (rc, dt))
            f.write("## stdout\n" + out + "\n## stderr\n" + err)
    return rc, out, err, dt


def first_error_line(err, out):
    for text in (err, out):
        for line in text.splitlines():
            low = line.lower()
            if any(k in low for k in ("error", "abort", "fallback", "mismatch", "timeout", "fail", "signal")):
                return line.strip()[:160]
    lines = [l for l in (err or out).splitlines() if l.strip()]
    return lines[-1].strip()[:160] if lines else "no output"


def parse_osu(text):
    """OSU-format output -> (kind, {size: value}, rss_kib or None, validation_ok or None)."""
    kind = "lat"
    rows = {}
    rss = None
    valid = None
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            if "MB/s" in s:
                kind = "bw"
            m = re.search(r"Peak RSS per rank \(KiB\): avg (\d+)", s)
            if m:
                rss = int(m.group(1))
            if "Validation: FAILED" in s:
                valid = False
            elif "Validation: Passed" in s and valid is None:
                valid = True
            continue
        tok = s.split()
        if tok and tok[-1] in ("Pass", "Fail"):
            if tok[-1] == "Fail":
                valid = False
            tok = tok[:-1]
        try:
            nums = [float(t) for t in tok]
        except ValueError:
            continue
        if len(nums) == 1:  # barrier: one latency column
            rows[0] = nums[0]
        elif len(nums) >= 2 and nums[0] == int(nums[0]):
            rows[int(nums[0])] = nums[1]
    return kind, rows, rss, valid


class Recorder:
    """Best-of-N per (bench, np, mode, size) plus run bookkeeping."""

    def __init__(self):
        self.best = {}      # (bench, np, mode) -> {size: value}
        self.kind = {}      # bench -> lat/bw
        self.runs = {}      # (bench, np, mode) -> [ok, total]
        self.errors = {}    # (bench, np, mode) -> first error text
        self.rss = {}       # (bench, np, mode) -> [kib...]
        self.cmds = {}      # (bench, np, mode) -> command line

    def add(self, bench, np_, mode, rc, out, err, cmd):
        key = (bench, np_, mode)
        self.cmds.setdefault(key, " ".join(shlex.quote(c) for c in cmd))
        counts = self.runs.setdefault(key, [0, 0])
        counts[1] += 1
        kind, rows, rss, valid = parse_osu(out)
        self.kind.setdefault(bench, kind)
        if rc != 0 or not rows or valid is False:
            reason = "exit %d: %s" % (rc, first_error_line(err, out)) if rc != 0 else (
                "validation failed" if valid is False else "no result rows")
            self.errors.setdefault(key, reason)
            return False
        counts[0] += 1
        if rss is not None:
            self.rss.setdefault(key, []).append(rss)
        best = self.best.setdefault(key, {})
        for size, v in rows.items():
            if size not in best:
                best[size] = v
            elif kind == "bw":
                best[size] = max(best[size], v)
            else:
                best[size] = min(best[size], v)
        return True


def native_accl(table, bench, np_, default=None):
    """The native and the ACCL entry of one of the Recorder's tables."""
    return table.get((bench, np_, "native"), default), table.get((bench, np_, "accl"), default)


# ----------------------------------------------------------------------------
# environment / tools
# ----------------------------------------------------------------------------
def mpi_env(extra=None):
    env = dict(os.environ)
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env.pop("LD_PRELOAD", None)  # only the launched ranks get it (mpirun -x)
    if extra:
        env.update(extra)
    return env


def ensure_plotter(allow_install):
    """Returns 'matplotlib', 'gnuplot' or None; installs python3-matplotlib via apt-get if allowed."""
    def have_mpl():
        try:
            importlib.invalidate_caches()
            import matplotlib  # noqa: F401
            return True
        except ImportError:
            return False

    system_python = "/usr/bin/python3"

    def system_python_has_mpl():
        # Started by another interpreter (pyenv, venv) that cannot see Debian's
        # python3-matplotlib: main() re-runs the script under Debian's.
        return os.path.realpath(sys.executable) != os.path.realpath(system_python) and \
            os.path.exists(system_python) and \
            subprocess.run([system_python, "-c", "import matplotlib"], capture_output=True).returncode == 0

    if have_mpl():
        return "matplotlib"
    if system_python_has_mpl():
        return "system-python"
    if shutil.which("gnuplot"):
        return "gnuplot"
    if allow_install and os.geteuid() == 0 and shutil.which("apt-get"):
        log("installing python3-matplotlib with apt-get (once)")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")

        def apt(*cmd):
            return run(["apt-get"] + list(cmd), env=env, timeout=900)

        rc, _, err, _ = apt("install", "-y", "--no-install-recommends", "python3-matplotlib")
        if rc != 0:
            apt("update")
            rc, _, err, _ = apt("install", "-y", "--no-install-recommends", "python3-matplotlib")
        if rc == 0 and have_mpl():
            return "matplotlib"
        if rc == 0 and system_python_has_mpl():  # installed for Debian's python, not the one running us
            return "system-python"
        log("python3-matplotlib install failed (%s); trying gnuplot" % err.strip().splitlines()[-1:] )
        rc, _, _, _ = apt("install", "-y", "--no-install-recommends", "gnuplot-nox")
        if rc == 0 and shutil.which("gnuplot"):
            return "gnuplot"
    return None


def find_binary(dirs, name):
    for d in dirs:
        if not d or not os.path.isdir(d):
            continue
        direct = os.path.join(d, name)
        if os.path.isfile(direct) and os.access(direct, os.X_OK):
            return direct
        for root, _, files in os.walk(d):
            if name in files:
                p = os.path.join(root, name)
                if os.access(p, os.X_OK):
                    return p
    return None


# ----------------------------------------------------------------------------
# the OSU-style matrix
# ----------------------------------------------------------------------------
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


def osu_args(args, bench, sizes=None):
    """OSU options of a run over the benchmark's size range, or over `sizes` (lo, hi) if given."""
    lo, hi = sizes or size_range(args, bench)
    a = []
    if bench != "barrier":
        a += ["-m", "%d:%d" % (lo, hi)]
    a += ["-i", str(args.iters), "-x", str(args.warmup)]
    if args.osu_dir is None and args.validate and bench not in args.extra:
        a += ["-c"]
    if bench in args.type_overrides:
        a += ["-T", args.type_overrides[bench]]
    return a


def mpirun_cmd(args, np_, prog, prog_args, accl_env=None, wrapper=None):
    cmd = [args.mpirun, "-np", str(np_), "--oversubscribe"] + shlex.split(args.mpirun_args)
    for k, v in (accl_env or {}).items():
        cmd += ["-x", "%s=%s" % (k, v)]
    return cmd + (wrapper or []) + [prog] + prog_args


def accl_env_for(args):
    env = {"LD_PRELOAD": args.pmpi_lib, "ACCL_FALLBACK": "error"}
    env.update(args.accl_env)
    return env


def run_matrix(args, rec, benches, nps, repeats, tag, ranges=None):
    """Alternating native/ACCL runs of each benchmark; `ranges` {bench: (lo, hi)} narrows the sizes."""
    total = len(benches) * len(nps) * repeats * (2 if args.pmpi_lib else 1)
    n = 0
    for np_ in nps:
        for bench in benches:
            prog = args.binaries.get(bench)
            if prog is None:
                log("skip %s: no binary" % bench)
                continue
            pa = osu_args(args, bench, (ranges or {}).get(bench))
            for rep in range(repeats):
                modes = ["native", "accl"] if args.pmpi_lib else ["native"]
                if rep % 2 == 1:
                    modes.reverse()  # alternate which mode goes first
                for mode in modes:
                    n += 1
                    cmd = mpirun_cmd(args, np_, prog, pa, accl_env_for(args) if mode == "accl" else None)
                    lp = os.path.join(args.logdir, "%s-%s-np%d-%s-r%d.log" % (tag, bench, np_, mode, rep))
                    rc, out, err, dt = run(cmd, env=mpi_env(), timeout=args.timeout, log_path=lp)
                    ok = rec.add(bench, np_, mode, rc, out, err, cmd)
                    what = bench if tag == "osu" else "%s %s" % (tag, bench)
                    log("[%d/%d] %-15s np=%d %-6s rep %d: %s (%.1f s)" % (
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


# ----------------------------------------------------------------------------
# allocations per call on the offloaded data path
# ----------------------------------------------------------------------------
ALLOC_PROGRAM = "tests/pmpi/pmpi_test_alloc"
ALLOC_COUNTER = "tests/pmpi/libaccl_test_alloc_counter.so"
ALLOC_ROUNDS = 200
# One round of tests/pmpi/test_alloc.c per rank: Send+Recv three times (8 B
# inside the envelope, 32 KiB eager, 128 KiB rendezvous), Irecv+Isend+Waitall
# (128 KiB), and 5 collectives.
ALLOC_CALLS_PER_ROUND = 14


def parse_allocations(text):
    """test_alloc output -> (worst allocations of any rank, rounds) or None."""
    found = [(int(m.group(1)), int(m.group(2))) for m in
             re.finditer(r"rank \d+: (\d+) allocations in (\d+) rounds", text)]
    if not found:
        return None
    return max(a for a, _ in found), found[0][1]


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


# ----------------------------------------------------------------------------
# callgrind: pure interposition cost
# ----------------------------------------------------------------------------
def parse_callgrind(path):
    """-> (totals Ir, edges {(caller_ob, caller_fn, callee_ob, callee_fn): [calls, inclusive Ir]})."""
    names = {"ob": {}, "fn": {}, "fl": {}}
    edges = {}
    total = 0
    ob = fn = None
    cob = cfn = None
    pending = None

    def name(kind, text):
        m = re.match(r"\((\d+)\)(?:\s+(.*))?$", text.strip())
        table = names["fn" if kind in ("fn", "cfn") else ("ob" if kind in ("ob", "cob") else "fl")]
        if m:
            if m.group(2) is not None:
                table[m.group(1)] = m.group(2)
            return table.get(m.group(1), "?")
        return text.strip()

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                if pending is not None:
                    parts = line.split()
                    incl = int(parts[1]) if len(parts) > 1 else 0
                    key = (ob, fn, cob if cob is not None else ob, cfn)
                    e = edges.setdefault(key, [0, 0])
                    e[0] += pending
                    e[1] += incl
                    pending = None
                    cob = None
                continue
            if line.startswith("ob="):
                ob = name("ob", line[3:])
            elif line.startswith("fn="):
                fn = name("fn", line[3:])
            elif line.startswith("cob="):
                cob = name("cob", line[4:])
            elif line.startswith("cfn="):
                cfn = name("cfn", line[4:])
            elif line.startswith("cfi=") or line.startswith("cfl="):
                name("fl", line[4:])
            elif line.startswith("fl=") or line.startswith("fi=") or line.startswith("fe="):
                name("fl", line[3:])
            elif line.startswith("calls="):
                pending = int(line[6:].split()[0])
            elif line.startswith("totals:") or line.startswith("summary:"):
                try:
                    total = max(total, int(line.split(":")[1].split()[0]))
                except (IndexError, ValueError):
                    pass
    return total, edges


def interposition_cost(files, calls):
    """Sums over rank files: app->MPI_X (wrapper or libmpi) and wrapper->PMPI_X edges for X in calls."""
    res = {"calls": 0, "incl": 0, "inner": 0, "total": 0, "wrapped": False}
    for path in files:
        total, edges = parse_callgrind(path)
        res["total"] += total
        for (cob_, cfn_, eob, efn), (n, incl) in edges.items():
            callee_base = os.path.basename(eob or "")
            caller_base = os.path.basename(cob_ or "")
            for x in calls:
                if efn in ("MPI_" + x, "PMPI_" + x):
                    in_pmpi_layer = "accl_pmpi" in callee_base
                    from_app = not caller_base.startswith("libmpi") and "accl" not in caller_base
                    if from_app and (in_pmpi_layer or callee_base.startswith("libmpi")):
                        res["calls"] += n
                        res["incl"] += incl
                        res["wrapped"] = res["wrapped"] or in_pmpi_layer
                    elif "accl" in caller_base and callee_base.startswith("libmpi"):
                        res["inner"] += incl
    return res


def run_callgrind(args):
    if not shutil.which("valgrind"):
        return {"error": "valgrind not found"}
    cgdir = os.path.join(args.logdir, "callgrind")
    os.makedirs(cgdir, exist_ok=True)
    cases = [("latency", ["-m", "8:8"], ["Send", "Recv"]), ("allreduce", ["-m", "8:8"], ["Allreduce"])]
    out = {}
    for bench, margs, calls in cases:
        prog = args.binaries.get(bench)
        if prog is None:
            continue
        row = {}
        modes = [("native", None)]
        if args.pmpi_lib:
            modes.append(("interposed", {"LD_PRELOAD": args.pmpi_lib, "ACCL_OFFLOAD": "off"}))
        for mode, env in modes:
            for f in os.listdir(cgdir):
                if f.startswith("cg.%s.%s." % (bench, mode)):
                    os.unlink(os.path.join(cgdir, f))
            wrapper = ["valgrind", "--tool=callgrind", "--compress-strings=no", "--compress-pos=no",
                       "--callgrind-out-file=" + os.path.join(cgdir, "cg.%s.%s.%%p" % (bench, mode))]
            cmd = mpirun_cmd(args, 2, prog, margs + ["-i", str(args.callgrind_iters), "-x", "10"], env, wrapper)
            rc, so, se, dt = run(cmd, env=mpi_env(), timeout=max(args.timeout, 900),
                                 log_path=os.path.join(args.logdir, "callgrind-%s-%s.log" % (bench, mode)))
            files = [os.path.join(cgdir, f) for f in os.listdir(cgdir) if f.startswith("cg.%s.%s." % (bench, mode))]
            if rc != 0 or not files:
                row[mode] = {"error": "exit %d: %s" % (rc, first_error_line(se, so))}
                continue
            row[mode] = interposition_cost(files, calls)
            log("callgrind %s %s: %s (%.0f s)" % (bench, mode, json.dumps(row[mode]), dt))
        out[bench] = row
    return out


# ----------------------------------------------------------------------------
# callgrind: where an offloaded 8 B hop spends its instructions
# ----------------------------------------------------------------------------
# The layers an offloaded MPI_Send passes through, outermost first: each entry
# is (label, function name prefix). Costs are inclusive, so a layer's own
# share is its entry's cost minus the next entry's.
SEND_LAYERS = [
    ("PMPI layer (matching state, envelope, slot budget)", "MPI_Send"),
    ("driver (checks, call encoding, request)", "accl::ACCL::send("),
    ("emulated CCLO call controller (call queue, completion)", "accl::emu::EmuDevice::start("),
    ("firmware passes (decode, slot, send step)", "accl::fw::ControlProgram::poll("),
    ("data plane move (plan, resolve buffers)", "accl::emu::EmuDataPlane::move("),
    ("transport (link table, shm ring write)", "accl::emu::LinkTable::send("),
]
# Inside MPI_Recv: what is not on the critical path (posting the next envelope
# receive, while the message flies) and what a wait-loop round costs.
RECV_PARTS = [
    ("posting the envelope receive (driver + device, off the critical path)", "accl::ACCL::recv("),
    ("wait-loop rounds (progress: device test, transport poll, firmware passes)", "accl::pmpi::progress_locked("),
    ("Open MPI progress (PMPI_Iprobe, every 16th round at most)", "accl::pmpi::native_progress("),
]
# Counted per call: lock and trylock calls, clock reads (glibc's internal
# aliases included: which name callgrind shows depends on the glibc build).
HOP_COUNTERS = [("mutex lock calls", ("pthread_mutex_lock", "___pthread_mutex_lock", "__pthread_mutex_lock",
                                      "pthread_mutex_trylock", "___pthread_mutex_trylock", "__pthread_mutex_trylock")),
                ("clock reads", ("clock_gettime", "__clock_gettime"))]


def hop_name_matches(name, prefix):
    """C++ entries are prefixes ending in "(" (any overload); C ones (MPI_Send) are whole names, so that
    MPI_Send does not also count MPI_Sendrecv. A symbol version (@@GLIBC_x) is ignored."""
    if not name:
        return False
    return name.startswith(prefix) if prefix.endswith("(") else name.split("@")[0] == prefix


def hop_inclusive(edges, prefix):
    """-> (calls, inclusive Ir) of the functions `prefix` names, counting only calls from other functions:
    a recursive call, direct or through others (callgrind names a re-entered function F'2, F'3, ...), would
    count its cost twice."""
    calls = incl = 0
    for (cob_, cfn_, eob, efn), (n, cost) in edges.items():
        if hop_name_matches(efn, prefix) and not hop_name_matches(cfn_, prefix) and not re.search(r"'\d+$", efn):
            calls += n
            incl += cost
    return calls, incl


def hop_profile_of(files, entry, parts, counters=HOP_COUNTERS):
    """Per call of `entry` over rank files collected with --toggle-collect=entry: its inclusive instructions,
    each part's inclusive instructions and calls, and the counters' calls."""
    res = {"calls": 0, "incl": 0, "parts": {p: [0, 0] for _, p in parts},
           "counters": {label: 0 for label, _ in counters}}
    for path in files:
        _, edges = parse_callgrind(path)
        n, incl = hop_inclusive(edges, entry)
        res["calls"] += n
        res["incl"] += incl
        for _, prefix in parts:
            c, i = hop_inclusive(edges, prefix)
            res["parts"][prefix][0] += c
            res["parts"][prefix][1] += i
        for label, names in counters:
            # One call per entry into the group: clock_gettime -> __clock_gettime is one clock read.
            res["counters"][label] += sum(n_ for (cob_, cfn_, eob, efn), (n_, _) in edges.items()
                                          if any(hop_name_matches(efn, name) for name in names)
                                          and not any(hop_name_matches(cfn_, name) for name in names))
    return res


def run_hop_profile(args):
    """Offloaded 8 B osu_latency under callgrind, once collecting inside MPI_Send only, once inside MPI_Recv."""
    if not shutil.which("valgrind"):
        return {"error": "valgrind not found"}
    prog = args.binaries.get("latency")
    if prog is None or not args.pmpi_lib:
        return {"error": "needs osu_latency and libaccl_pmpi.so"}
    cgdir = os.path.join(args.logdir, "callgrind")
    os.makedirs(cgdir, exist_ok=True)
    out = {"iters": args.callgrind_iters}
    for side, entry, parts in (("send", "MPI_Send", SEND_LAYERS), ("recv", "MPI_Recv", RECV_PARTS)):
        tag = "cg.hop-%s." % side
        for f in os.listdir(cgdir):
            if f.startswith(tag):
                os.unlink(os.path.join(cgdir, f))
        wrapper = ["valgrind", "--tool=callgrind", "--compress-strings=no", "--compress-pos=no",
                   "--toggle-collect=" + entry, "--callgrind-out-file=" + os.path.join(cgdir, tag + "%p")]
        cmd = mpirun_cmd(args, 2, prog, ["-m", "8:8", "-i", str(args.callgrind_iters), "-x", "10"],
                         accl_env_for(args), wrapper)
        rc, so, se, dt = run(cmd, env=mpi_env(), timeout=max(args.timeout, 900),
                             log_path=os.path.join(args.logdir, "callgrind-hop-%s.log" % side))
        files = [os.path.join(cgdir, f) for f in os.listdir(cgdir) if f.startswith(tag)]
        if rc != 0 or len(files) != 2:
            out[side] = {"error": "exit %d, %d profile files of 2: %s" % (rc, len(files), first_error_line(se, so))}
            continue
        out[side] = hop_profile_of(files, entry, parts)
        log("callgrind hop %s: %d calls, %.0f Ir/call (%.0f s)" % (
            side, out[side]["calls"], out[side]["incl"] / max(1, out[side]["calls"]), dt))
    return out


def md_section(L, title, data, skip_name):
    """Appends a section's heading; False, with the reason written under it, when the section did not run
    (None: not asked for, {}: --skip, {"error": ...}: failed)."""
    L.append(title)
    L.append("")
    if not data or "error" in data:
        L.append("_not run_" if data is None else
                 "_skipped (--skip %s)_" % skip_name if not data else "_skipped: %s_" % data["error"])
        L.append("")
        return False
    return True


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


# ----------------------------------------------------------------------------
# accl-bench-core
# ----------------------------------------------------------------------------
def read_csv(path):
    try:
        with open(path) as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


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


# ----------------------------------------------------------------------------
# latency by layer
# ----------------------------------------------------------------------------
# The rungs, bottom up: what each adds on the way from the wire to MPI_Recv.
LADDER_RUNGS = [
    ("transport", "shared-memory transport alone (accl-bench-pingpong --layer transport)"),
    ("driver", "ACCL driver API: send/recv through the emulated CCLO (accl-bench-pingpong --layer driver)"),
    ("mpi", "MPI_Send/MPI_Recv under libaccl_pmpi.so (osu_latency)"),
]


def parse_rung_mean(text, size):
    """Mean one-way µs of `size` bytes from accl-bench-pingpong output."""
    for line in text.splitlines():
        cols = line.split()
        if len(cols) == 5 and cols[0] == str(size):
            try:
                return float(cols[4])
            except ValueError:
                return None
    return None


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


# ----------------------------------------------------------------------------
# outputs
# ----------------------------------------------------------------------------
def speedup(kind, native, accl):
    if native is None or accl is None or native <= 0 or accl <= 0:
        return None
    return native / accl if kind == "lat" else accl / native


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


def plot_all(args, rec, plotter, core, scaling):
    made = []
    if plotter is None:
        return made
    series = {}
    for (bench, np_, mode), best in rec.best.items():
        series.setdefault(bench, []).append((np_, mode, best))
    if plotter == "matplotlib":
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        def save(fig, name):
            p = os.path.join(args.out, "plot-%s.png" % name)
            fig.tight_layout()
            fig.savefig(p, dpi=110)
            plt.close(fig)
            made.append(p)

        for bench, lines in sorted(series.items()):
            kind = rec.kind.get(bench, "lat")
            fig, ax = plt.subplots(figsize=(7, 4.5))
            nps = sorted({n for n, _, _ in lines})
            for np_, mode, best in sorted(lines, key=lambda t: (t[0], t[1] != "native")):
                xs = sorted(best)
                if bench == "barrier":
                    continue
                ax.plot([max(x, 0.5) for x in xs], [best[x] for x in xs], marker="o" if mode == "native" else "s",
                        markersize=3, color="C%d" % nps.index(np_),
                        linestyle="-" if mode == "native" else "--", label="%s np=%d" % (mode, np_))
            if bench == "barrier":
                labels, vals = [], []
                for np_, mode, best in sorted(lines):
                    labels.append("%s\nnp=%d" % (mode, np_))
                    vals.append(best.get(0, 0))
                ax.bar(labels, vals)
                ax.set_ylabel("latency (us)")
            else:
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.set_xlabel("message size (bytes)")
                ax.set_ylabel("latency (us)" if kind == "lat" else "bandwidth (MB/s)")
                ax.legend(fontsize=8)
            ax.set_title("%s: native Open MPI vs ACCL (best of %d)" % (bench, args.repeats))
            ax.grid(True, which="both", alpha=0.3)
            save(fig, bench)
        rows = core.get("rows") or []
        if rows:
            fig, ax = plt.subplots(figsize=(7, 4.5))
            for op in ("copy", "allreduce"):
                r = [x for x in rows if x["section"] == "sweep" and x["op"] == op and x["check"] == "ok"]
                if r:
                    ax.plot([int(x["bytes"]) for x in r], [float(x["gbps"]) for x in r], marker="o", markersize=3,
                            label="ACCL %s" % op)
            r = [x for x in rows if x["section"] == "sweep" and x["op"] == "copy"]
            if r:
                ax.plot([int(x["bytes"]) for x in r], [float(x["memcpy_gbps"]) for x in r], linestyle=":",
                        label="memcpy")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("bytes")
            ax.set_ylabel("GB/s")
            ax.set_title("accl-bench-core (4 in-process CCLOs)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
            save(fig, "core")
        rows = scaling.get("rows") or []
        if rows:
            fig, ax = plt.subplots(figsize=(7, 4.5))
            for size in sorted({int(x["bytes"]) for x in rows}):
                r = sorted([x for x in rows if int(x["bytes"]) == size], key=lambda x: int(x["ranks"]))
                ax.plot([int(x["ranks"]) for x in r], [float(x["time_us"]) / 1e3 for x in r], marker="o",
                        label="measured %s" % human(size))
                ax.plot([int(x["ranks"]) for x in r], [float(x["model2_us"]) / 1e3 for x in r], linestyle="--",
                        label="ring model, shared cores %s" % human(size))
                ax.plot([int(x["ranks"]) for x in r], [float(x["model_us"]) / 1e3 for x in r], linestyle=":",
                        label="ring model, link per rank %s" % human(size))
            ax.set_xlabel("in-process ranks")
            ax.set_ylabel("allreduce time (ms)")
            ax.set_yscale("log")
            ax.set_title("allreduce scaling vs ring model 2(P-1)/P*N")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
            save(fig, "scaling")
    else:  # gnuplot
        for bench, lines in sorted(series.items()):
            if bench == "barrier":
                continue
            kind = rec.kind.get(bench, "lat")
            plots = []
            for i, (np_, mode, best) in enumerate(sorted(lines)):
                dp = os.path.join(args.logdir, "plot-%s-%d.dat" % (bench, i))
                with open(dp, "w") as f:
                    for x in sorted(best):
                        f.write("%d %g\n" % (max(x, 1), best[x]))
                plots.append("'%s' using 1:2 with linespoints dt %d title '%s np=%d'" % (
                    dp, 1 if mode == "native" else 2, mode, np_))
            p = os.path.join(args.out, "plot-%s.png" % bench)
            script = ("set terminal pngcairo size 800,520\nset output '%s'\nset logscale xy\nset grid\n"
                      "set xlabel 'message size (bytes)'\nset ylabel '%s'\nset title '%s: native vs ACCL'\n"
                      "set key left top\nplot %s\n") % (p, "latency (us)" if kind == "lat" else "bandwidth (MB/s)",
                                                       bench, ", ".join(plots))
            gp = os.path.join(args.logdir, "plot-%s.gp" % bench)
            with open(gp, "w") as f:
                f.write(script)
            if run(["gnuplot", gp])[0] == 0:
                made.append(p)
    return made


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def g3(x):
    """Speedup with 3 significant digits (0.00123 stays readable)."""
    if x is None:
        return "–"
    return "%.3g" % x


def fmt(v, kind):
    if v is None:
        return "–"
    return "%.2f" % v if kind == "lat" or v < 1000 else "%.0f" % v


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


# The speed targets of the benchmarks issue, checked against this run's numbers.
# (label, benchmark, message size, kind of limit, limit); "max_time_ratio":
# ACCL time / native time must not exceed the limit; "min_speedup": the ACCL
# speedup (native / ACCL time, or ACCL / native bandwidth) must reach it.
MPI_TARGETS = (
    [("8 B point-to-point latency", "latency", 8, "max_time_ratio", 2.0),
     ("bandwidth at 4 MiB", "bw", 4 << 20, "min_speedup", 0.8)] +
    [("allreduce %s" % human(1 << s), "allreduce", 1 << s, "min_speedup", 1.0) for s in range(20, 25)] +
    [("%s 1 MiB" % b, b, 1 << 20, "min_speedup", 0.8)
     for b in ("bcast", "reduce", "allgather", "reduce_scatter", "alltoall")])
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


def write_markdown(args, rec, cg, core, scaling, plots, started, path, profiles=(), allocs=None, ladder=None,
                   hop=None):
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
    L.append("* mpirun: `%s -np N --oversubscribe %s`" % (args.mpirun, args.mpirun_args))
    L.append("* **ACCL speedup** = native time / ACCL time (latency) or ACCL MB/s / native MB/s (bandwidth): "
             "> 1 means ACCL is faster.")
    L.append("")
    if not args.pmpi_lib:
        L.append("> **libaccl_pmpi.so was not found: only native runs were made.**")
        L.append("")

    # summary
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

    # per benchmark tables
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
    L.append("* `logs/` — every command line with its full output (`stats-*.log`: one ACCL_STATS=1 run per benchmark)")
    L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))


# ----------------------------------------------------------------------------
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
    ap.add_argument("--skip", default="", help="comma list of sections to skip: osu,alloc,callgrind,ladder,hop,core,scale,stats,plots,profile")
    ap.add_argument("--quick", action="store_true",
                    help="short run: sizes to 64K, -i 50 -x 5, core to 16M with budget 0.05, callgrind 500 iters, "
                         "latency by layer 2000 round trips")
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
                            ("ladder_iters", 2000)):
            if getattr(args, name) == ap.get_default(name):
                setattr(args, name, quick)
    if args.target_repeats < 0:
        ap.error("--target-repeats must be >= 0")
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    skip = set(filter(None, args.skip.split(",")))
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
    for b in benches:
        if b not in BENCHMARKS:
            ap.error("unknown benchmark %r (known: %s)" % (b, ", ".join(BENCHMARKS)))

    # programs: a fresh clone gets a release build in build-bench; an existing
    # build is brought up to date (ninja does nothing when it is), so the
    # report never measures a stale libaccl_pmpi.so
    osu_build_dir = os.path.join(args.build, "benchmarks", "osu")
    want_targets = ["pmpi/libaccl_pmpi.so", "benchmarks/core/accl-bench-core", "benchmarks/core/accl-bench-pingpong"]
    if "alloc" not in skip:
        want_targets += [ALLOC_PROGRAM, ALLOC_COUNTER]
    if not args.osu_dir:
        want_targets += ["benchmarks/osu/osu_" + b for b in sorted((set(benches) | set(SCALE_BENCHMARKS) |
                                                                     {"latency", "allreduce"}) - set(extra))]
    pmpi_default = os.path.join(args.build, "pmpi", "libaccl_pmpi.so")
    core_default = os.path.join(args.build, "benchmarks", "core", "accl-bench-core")
    if not args.no_build:
        build_programs(args.build, want_targets, args.logdir)
    args.osu_bin_dir = os.path.abspath(args.osu_dir) if args.osu_dir else osu_build_dir
    args.binaries = {}
    args.extra = extra
    for b in (set(benches) | set(SCALE_BENCHMARKS) | {"latency", "allreduce"}) - set(extra):
        p = find_binary([args.osu_bin_dir], "osu_" + b)
        if p:
            args.binaries[b] = p
        elif b in benches:
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

    write_csv(args, rec, os.path.join(args.out, "results.csv"))
    plots = plot_all(args, rec, plotter, core, scaling)
    profiles = [] if "profile" in skip or "core" in skip else profile_missed(args, core)
    write_markdown(args, rec, cg, core, scaling, plots, started, os.path.join(args.out, "report.md"), profiles,
                   allocs, ladder, hop)
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

# SPDX-License-Identifier: Apache-2.0
"""What every part of the report uses: the benchmark list, logging, running a command, mpirun command
lines and their environment, and the formatting of numbers and markdown tables."""

import argparse
import os
import re
import shlex
import subprocess
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


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
    "allgatherv": ("lat", []),
    "gatherv": ("lat", []),
    "scatterv": ("lat", []),
    "alltoallv": ("lat", []),
    "scan": ("lat", []),
    "neighbor_allgather": ("lat", []),
    "neighbor_alltoall": ("lat", []),
    "barrier": ("lat", []),
}
SCALE_BENCHMARKS = ["allreduce", "bcast", "alltoall", "barrier"]


def log(msg):
    print("[report] " + msg, flush=True)


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


def mpi_env(extra=None):
    env = dict(os.environ)
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env.pop("LD_PRELOAD", None)  # only the launched ranks get it (mpirun -x)
    if extra:
        env.update(extra)
    return env


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


def mpirun_cmd(args, np_, prog, prog_args, accl_env=None, wrapper=None):
    cmd = [args.mpirun, "-np", str(np_), "--oversubscribe"] + shlex.split(args.mpirun_args)
    for k, v in (accl_env or {}).items():
        cmd += ["-x", "%s=%s" % (k, v)]
    return cmd + (wrapper or []) + [prog] + prog_args


def accl_env_for(args):
    # The ACCL runs measure the device path: every call offloaded (ACCL_POLICY=offload; the default policy
    # follows a tuning file that keeps calls native), and a fallback aborts the run.
    env = {"LD_PRELOAD": args.pmpi_lib, "ACCL_FALLBACK": "error", "ACCL_POLICY": "offload"}
    env.update(args.accl_env)
    return env


def speedup(kind, native, accl):
    if native is None or accl is None or native <= 0 or accl <= 0:
        return None
    return native / accl if kind == "lat" else accl / native


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

# SPDX-License-Identifier: Apache-2.0
"""What every part of the report uses: the benchmark list, logging, running a command, mpirun command
lines and their environment, and the formatting of numbers and markdown tables."""

import argparse
import os
import re
import shlex
import signal
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
    """Runs cmd; returns (rc, stdout, stderr, seconds). Never raises on failure. A run that times out is
    killed with everything it started (mpirun's ranks too: it leads a process group of its own) and returns
    rc 124."""
    t0 = time.time()
    try:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except OSError as e:
        rc, out, err = 127, "", str(e)
    except subprocess.TimeoutExpired:
        kill_group(p)
        out, err = p.communicate()
        rc = 124
        err += "\n[report] TIMEOUT after %d s\n" % timeout
    except BaseException:
        kill_group(p)  # Ctrl-C or an error in the report: leave no ranks behind
        p.communicate()
        raise
    dt = time.time() - t0
    if log_path:
        with open(log_path, "w") as f:
            f.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
            f.write("# rc=%d, %.1f s\n" % (rc, dt))
            f.write("## stdout\n" + out + "\n## stderr\n" + err)
    return rc, out, err, dt


def kill_group(p):
    """Ends the process group p leads: SIGTERM first (mpirun then takes its ranks down with it), SIGKILL
    to what is left after 5 s."""
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, None)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        if grace:
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                pass


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


def md_section(L, title, data, skip_name):
    """Appends a section's heading; False, with the reason written under it, when the section did not run
    (None: not asked for, {}: --skip, {"error": ...}: failed)."""
    L.append(title)
    L.append("")
    if not data or "error" in data:
        L.append("_not run_" if data is None else "_skipped (--skip %s, or not in --only)_" % skip_name
                 if not data else "_skipped: %s_" % data["error"])
        L.append("")
        return False
    return True


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

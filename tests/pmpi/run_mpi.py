#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs an MPI test program under mpirun and checks its exit code and output.

run_mpi.py --np N [--preload LIB] [--env K=V]... [--rank0-env K=V]... [--expect-fail]
           [--expect-stderr REGEX]... [--reject-stderr REGEX]... [--expect-stdout REGEX]... -- PROGRAM ARGS...

The child environment is ours plus --env settings (local launches inherit
it). --preload passes LD_PRELOAD to the ranks only (-x), never to mpirun.
--rank0-env settings apply to rank 0 only (an MPMD launch: rank 0 in an app
context of its own), for ranks that are configured differently.
"""
import argparse
import os
import re
import subprocess
import sys


def mpirun_environment():
    """Our environment plus what mpirun needs here: root allowed, quiet,
    single-host, oversubscribed (2 cores, up to 4 ranks), no binding."""
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMPI_MCA_btl_base_warn_component_unused", "0")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    env.setdefault("OMPI_MCA_hwloc_base_binding_policy", "none")
    return env


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--preload")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--rank0-env", action="append", default=[])
    p.add_argument("--expect-fail", action="store_true")
    p.add_argument("--expect-stderr", action="append", default=[])
    p.add_argument("--reject-stderr", action="append", default=[], help="fail when stderr matches")
    p.add_argument("--expect-stdout", action="append", default=[])
    p.add_argument("--timeout", type=float, default=170)
    p.add_argument("--cpus", help="run the job on these CPUs only (taskset -c LIST, mpirun --bind-to none)")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    env = mpirun_environment()
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    preload = ["-x", "LD_PRELOAD=" + a.preload] if a.preload else []
    if a.rank0_env and a.np > 1:
        rank0 = [x for kv in a.rank0_env for x in ("-x", kv)]
        full = ["mpirun", "-np", "1"] + preload + rank0 + cmd + [":", "-np", str(a.np - 1)] + preload + cmd
    else:
        full = ["mpirun", "-np", str(a.np)] + preload + [x for kv in a.rank0_env for x in ("-x", kv)] + cmd
    if a.cpus:
        full = ["taskset", "-c", a.cpus, full[0], "--bind-to", "none"] + full[1:]
    try:
        r = subprocess.run(full, env=env, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired as e:
        sys.stdout.write((e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""))
        sys.stderr.write((e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or ""))
        print(f"TIMEOUT after {a.timeout}s: {' '.join(full)}")
        return 1
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    ok = True
    if a.expect_fail and r.returncode == 0:
        print("expected a failing run, got exit code 0")
        ok = False
    if not a.expect_fail and r.returncode != 0:
        print(f"exit code {r.returncode}")
        ok = False
    for rx in a.expect_stderr:
        if not re.search(rx, r.stderr, re.M):
            print(f"stderr does not match /{rx}/")
            ok = False
    for rx in a.reject_stderr:
        if m := re.search(rx, r.stderr, re.M):
            print(f"stderr matches /{rx}/, which it must not: {m.group(0)!r}")
            ok = False
    for rx in a.expect_stdout:
        if not re.search(rx, r.stdout, re.M):
            print(f"stdout does not match /{rx}/")
            ok = False
    print(("OK: " if ok else "FAILED: ") + " ".join(full))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Link mode as a user does it: mpicc app.c $(pkg-config --libs accl-pmpi),
against the build tree's uninstalled accl-pmpi.pc (plus a run path to its
library), then runs the program with run_mpi.py (arguments after --), without
LD_LIBRARY_PATH.

pkgconfig_link.py PC_DIR SOURCE OUTPUT -- RUN_MPI_ARGS... (program = OUTPUT)
"""
import os
import subprocess
import sys


def main():
    pc_dir, source, output = sys.argv[1:4]
    rest = sys.argv[4:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    env = dict(os.environ)
    env["PKG_CONFIG_PATH"] = pc_dir + os.pathsep + env.get("PKG_CONFIG_PATH", "")
    libs = subprocess.run(["pkg-config", "--libs", "accl-pmpi"], env=env, capture_output=True, text=True,
                          check=True).stdout.split()
    # The uninstalled .pc names the library's directory (-L) but no run path; with one the program runs like
    # the build tree's own ones, without LD_LIBRARY_PATH (which meson test would otherwise set for it).
    run_paths = ["-Wl,-rpath," + flag[2:] for flag in libs if flag.startswith("-L")]
    cmd = ["mpicc", "-O1", "-I" + os.path.dirname(source), source, "-o", output] + libs + run_paths
    print(" ".join(cmd))
    subprocess.run(cmd, env=env, check=True)
    needed = subprocess.run(["readelf", "-d", output], capture_output=True, text=True).stdout
    order = [l.split("[")[1].rstrip("]") for l in needed.splitlines() if "(NEEDED)" in l]
    print("NEEDED:", order)
    if order.index("libaccl_pmpi.so") > min(i for i, n in enumerate(order) if n.startswith("libmpi")):
        print("libaccl_pmpi.so must come before libmpi to interpose")
        return 1
    runner = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_mpi.py")
    split = rest.index("--") if "--" in rest else len(rest)
    args = rest[:split] + ["--", output] + rest[split + 1:]
    env.pop("LD_LIBRARY_PATH", None)
    return subprocess.run([sys.executable, runner] + args, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Link mode as a user does it: mpicc app.c $(pkg-config --libs accl-pmpi),
against the build tree's uninstalled accl-pmpi.pc, then runs the program with
run_mpi.py (arguments after --).

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
    cmd = ["mpicc", "-O1", "-I" + os.path.dirname(source), source, "-o", output] + libs
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
    return subprocess.run([sys.executable, runner] + args).returncode


if __name__ == "__main__":
    sys.exit(main())

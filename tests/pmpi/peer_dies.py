#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs test_peer_dies under mpirun and checks what the survivors saw.

peer_dies.py --np N --mode return|fatal --how kill|stop --timeout-ms T
             [--transport shm|tcp] [--preload LIB] [--delay-ms D] -- PROGRAM

mpirun reacts to a process killed by a signal by tearing the job down, which
could hide what the survivors do. So mpirun runs with --enable-recovery and
orte_abort_on_non_zero_status=0 (verified on Open MPI 4.1.4: the survivors
keep running and the job ends when they exit), and each survivor writes its
verdict to a file before exiting. Checks:

  return  every survivor wrote rank<R>.txt: a non-success error class, the
          call took at most T + margin, MPI_Error_string names the call, the
          rank and the cause; the job ends by itself (stop: once the runner
          killed the frozen victim after the survivors were done)
  fatal   every survivor prints the layer's "fatal: MPI_<call> on rank R failed
          in ACCL (offloaded): <cause>" line and MPI aborts; the job ends by
          itself within the same bound
Nothing may hang: the whole run is bounded; a run that needs it fails.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from run_mpi import mpirun_environment  # same directory: the script's sys.path[0]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--np", type=int, default=3)
    p.add_argument("--mode", choices=["return", "fatal"], required=True)
    p.add_argument("--how", choices=["kill", "stop"], required=True)
    p.add_argument("--timeout-ms", type=int, required=True)
    p.add_argument("--transport", default="auto")
    p.add_argument("--preload")
    p.add_argument("--delay-ms", type=int, default=50)
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    env = mpirun_environment()
    env["ACCL_TIMEOUT_MS"] = str(a.timeout_ms)
    env["ACCL_PMPI_TIMEOUT_MS"] = str(a.timeout_ms)
    env["ACCL_EMU_TRANSPORT"] = a.transport
    # A loaded 2-core machine delays wake-ups and process start; the bound
    # still catches a wait that ignores the device timeout.
    margin_ms = max(3000, a.timeout_ms)
    bound_s = 60 + 3 * a.timeout_ms / 1000
    survivors = list(range(a.np - 1))
    ok = True
    timeouts = 0  # survivors whose cause was the device timeout
    with tempfile.TemporaryDirectory(prefix="accl-peer-dies-") as d:
        mpirun = ["mpirun", "-np", str(a.np), "--enable-recovery", "--mca", "orte_abort_on_non_zero_status", "0"]
        if a.preload:
            mpirun += ["-x", "LD_PRELOAD=" + a.preload]
        full = mpirun + cmd + [a.mode, a.how, d, str(a.delay_ms)]
        proc = subprocess.Popen(full, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        start = time.monotonic()
        victim_killed = False
        timed_out = False
        while proc.poll() is None:
            if time.monotonic() - start > bound_s:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                break
            if a.how == "stop" and not victim_killed:
                done = all(os.path.exists(os.path.join(d, f"rank{r}.txt")) for r in survivors)
                pidfile = os.path.join(d, "victim.pid")
                # fatal mode: the job aborts by itself, which also ends the frozen victim
                if a.mode == "return" and done and os.path.exists(pidfile):
                    with open(pidfile) as f:
                        os.kill(int(f.read().strip()), signal.SIGKILL)
                    victim_killed = True
            time.sleep(0.05)
        out, err = proc.communicate()
        sys.stdout.write(out)
        sys.stderr.write(err)
        if timed_out:
            print(f"HANG: the job did not end within {bound_s:.0f} s")
            ok = False
        if a.mode == "fatal":
            # Under --enable-recovery mpirun exits 0 even after MPI_Abort (and
            # Open MPI's own notice sometimes gets lost in its show_help), so
            # the abort is checked here: each survivor printed the layer's
            # line and none came back from the error handler (no report file).
            # stop: the first failure must be the device timeout; a survivor
            # still waiting when another aborts sees that one's links close.
            cause = "(LINK_ERROR|TIMEOUT)"
            for r in survivors:
                rx = rf"\[accl-pmpi rank {r}\] fatal: MPI_(Allreduce|Bcast) on rank {r} failed in ACCL \(offloaded\): .*{cause}"
                if not re.search(rx, err):
                    print(f"stderr does not match /{rx}/")
                    ok = False
                else:
                    timeouts += "TIMEOUT" in re.search(rx, err).group(0)
                if os.path.exists(os.path.join(d, f"rank{r}.txt")):
                    print(f"rank {r} came back from MPI_ERRORS_ARE_FATAL")
                    ok = False
        else:
            for r in survivors:
                path = os.path.join(d, f"rank{r}.txt")
                if not os.path.exists(path):
                    print(f"rank {r} reported no error")
                    ok = False
                    continue
                text = open(path).read()
                m = re.search(r"call=(\S+) rc=(-?\d+) class=(-?\d+) ms=(\d+)\nstring=(.*)", text)
                if not m:
                    print(f"rank {r}: unreadable report: {text!r}")
                    ok = False
                    continue
                call, rc, cls, ms, string = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5)
                if rc == 0 or cls == 0:
                    print(f"rank {r}: error code {rc} class {cls} is success")
                    ok = False
                if ms > a.timeout_ms + margin_ms:
                    print(f"rank {r}: {call} took {ms} ms to fail, more than {a.timeout_ms} + {margin_ms} ms")
                    ok = False
                cause = "(LINK_ERROR|TIMEOUT)"
                timeouts += "TIMEOUT" in string
                if not re.search(rf"^{call} on rank {r} failed in ACCL \(offloaded\): .*{cause}", string):
                    print(f"rank {r}: error string does not name call, rank and cause: {string!r}")
                    ok = False
                print(f"rank {r}: {call} failed after {ms} ms, class {cls}: {string}")
        if a.how == "stop" and timeouts == 0:
            print("a frozen peer must make at least one survivor fail by the device timeout")
            ok = False
    print(("OK: " if ok else "FAILED: ") + " ".join(full))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""accl-info --check-settings runs the layers' own start-up checks: bad values
are errors naming the variable (exit status 1), typos are warnings naming the
closest setting, and a clean environment passes."""
import os
import subprocess
import sys

accl_info = sys.argv[1]
clean = {k: v for k, v in os.environ.items() if not k.startswith("ACCL_")}


def run(extra):
    env = dict(clean, **extra)
    return subprocess.run([accl_info, "--check-settings"], env=env, capture_output=True, text=True, timeout=60)


failures = []
r = run({})
if r.returncode != 0 or "settings: ok" not in r.stdout:
    failures.append(f"clean environment: exit {r.returncode}, {r.stdout!r} {r.stderr!r}")

r = run({"ACCL_RX_BUFFER_SIZE": "7", "ACCL_EMU_TRANSPORT": "smoke-signals", "ACCL_TIMOUT_MS": "5",
         "ACCL_OFFLOAD_CALLS": "^"})
expected = [
    "accl-info: error: ACCL_RX_BUFFER_SIZE=7: too small; allowed: an integer from 64 to 1073741824 bytes",
    "accl-info: error: ACCL_EMU_TRANSPORT=smoke-signals: unknown word; allowed: auto, inproc, shm, tcp, udp",
    "accl-info: error: ACCL_OFFLOAD_CALLS=^: names no call;",
    "accl-info: warning: ACCL_TIMOUT_MS is not a setting (did you mean ACCL_TIMEOUT_MS?); ignored",
]
if r.returncode != 1:
    failures.append(f"bad settings: exit {r.returncode}, expected 1")
for line in expected:
    if line not in r.stderr:
        failures.append(f"missing from stderr: {line}")

# Under an MPI launcher of 2 ranks, inproc is refused as MPI_Init refuses it.
r = run({"ACCL_EMU_TRANSPORT": "inproc", "OMPI_COMM_WORLD_SIZE": "2"})
if r.returncode != 1 or "ACCL_EMU_TRANSPORT=inproc: the in-process transport reaches only this process" not in r.stderr:
    failures.append(f"inproc under 2 ranks: exit {r.returncode}, {r.stderr!r}")

# The full report lists the problem too.
r = subprocess.run([accl_info, "--no-emu", "--parsable"], env=dict(clean, ACCL_STATS="maybe"),
                   capture_output=True, text=True, timeout=120)
if "setting:problem_1:ACCL_STATS=maybe: not a boolean" not in r.stdout:
    failures.append("accl-info --parsable does not report ACCL_STATS=maybe")

for f in failures:
    print("FAILED:", f)
print("accl-info settings check:", "failed" if failures else "passed")
sys.exit(1 if failures else 0)

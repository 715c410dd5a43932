# SPDX-License-Identifier: Apache-2.0
"""pyaccl on a public ACCL simulation session: seed 000's cells, then host and device buffers and a
chain, with every instance connected to its own public cclo_emu process through sim_sock.

Usage: pyaccl_public_session.py CCLO_EMU PEER_DIR LOG_DIR
Exits 77 (skipped, with the reason) when CCLO_EMU does not exist: PEER_DIR (public ACCL, its
build.sh) is absent, or `ninja -C build accl-public-emu` has not built it yet (3-6 minutes).

Only what public firmware rules allow: SUM and MAX, every message at most the RX buffer size
(eager). cclo_emu sleeps ~10 ms per Ethernet packet, so a small collective takes about a second.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

# The seed cells and the port helper live beside the pytest tests that use them too.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from port_blocks import block_is_free  # noqa: E402
from test_seed000_collectives import CELLS as SEED000_CELLS  # noqa: E402

WORLD_SIZE = 2
# Longest wait for one round of calls on all ranks; each call is bounded by ACCL_TIMEOUT_MS too.
ROUND_TIMEOUT_S = 600


def free_port_block(count):
    """A base port such that base .. base+count-1 can all be bound now (cclo_emu takes 4 per rank)."""
    start = 21000 + (os.getpid() * 64) % 30000
    for attempt in range(200):
        base = 21000 + (start - 21000 + attempt * 64) % 30000
        if block_is_free(base, count):
            return base
    raise RuntimeError(f"no block of {count} free ports for cclo_emu")


class Session:
    """WORLD_SIZE cclo_emu processes (ours; killed by pid at the end), ZMQ command port base + rank."""

    def __init__(self, cclo_emu, log_dir):
        self.base = free_port_block(4 * WORLD_SIZE)
        self.procs, self.logs = [], []
        for rank in range(WORLD_SIZE):
            log = os.path.join(log_dir, f"pyaccl-cclo_emu-{self.base}-rank{rank}.log")
            with open(log, "wb") as out:
                self.procs.append(subprocess.Popen(
                    [cclo_emu, "-s", str(WORLD_SIZE), "-r", str(rank), "-p", str(self.base), "-c", "tcp", "-b"],
                    stdout=out, stderr=subprocess.STDOUT))
            self.logs.append(log)
        deadline = time.monotonic() + 60
        for rank in range(WORLD_SIZE):
            while not self._accepts(self.base + rank):
                self.check_running()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"cclo_emu rank {rank} did not listen within 60 s, see {self.logs[rank]}")
                time.sleep(0.05)

    @staticmethod
    def _accepts(port):
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    def check_running(self):
        for rank, proc in enumerate(self.procs):
            if proc.poll() is not None:
                raise RuntimeError(f"cclo_emu rank {rank} ended (status {proc.returncode}), see {self.logs[rank]}")

    def close(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs:
            proc.wait(timeout=30)


def seed000_cells(base_port):
    """Seed 000's code cells as tests/python runs them, but for its last (deinit, which main does after
    buffers_and_chains): WORLD_SIZE = 2 (the session's size) and each instance given its session
    instance (sim_sock) are the only changes."""
    setup, *rest = SEED000_CELLS[:-1]
    edits = [("WORLD_SIZE = 4\n", f"WORLD_SIZE = {WORLD_SIZE}\n"),
             ("sim_mode=True))", f'sim_mode=True,\n{" " * 35}sim_sock="tcp://localhost:" + str({base_port} + i)))')]
    for seed_text, session_text in edits:
        if setup.count(seed_text) != 1:
            raise RuntimeError(f"seed 000's first cell no longer holds '{seed_text.strip()}' once")
        setup = setup.replace(seed_text, session_text)
    return [setup, *rest]


def run_ranks(instances, fn):
    """fn(rank, instance) on every rank at once, one thread each; returns the results, raises the first error."""
    results, errors = [None] * len(instances), []

    def body(rank):
        try:
            results[rank] = fn(rank, instances[rank])
        except BaseException as e:  # noqa: B036 (re-raised in the main thread)
            errors.append(e)

    threads = [threading.Thread(target=body, args=(r,)) for r in range(len(instances))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=ROUND_TIMEOUT_S)
        if t.is_alive():
            raise RuntimeError(f"a rank did not finish its calls within {ROUND_TIMEOUT_S} s")
    if errors:
        raise errors[0]
    return results


def buffers_and_chains(instances):
    """Seed 001's setup calls, device and host-only buffers of the session, explicit syncs, MAX, and a
    waitfor chain (host-side on this device)."""
    import numpy as np
    from pyaccl import ACCLReduceFunctions
    count = 16

    def rank_fn(rank, inst):
        # Seed 001's configuration calls, asking for what the constructor configured: no device traffic.
        inst.setup_rx_buffers(nbufs=16, bufsize=16 * 1024)
        inst.configure_communicator([dict(r) for r in inst.ranks], rank)
        inst.open_port()
        inst.open_con()
        assert inst.ranks[rank]["session_id"] == rank  # as public ACCL's drivers name the instances
        # Host-only memory: lives in the session's host address space, no syncs.
        host_src = inst.allocate((count,), dtype=np.int32, host_only=True)
        host_dst = inst.allocate((count,), dtype=np.int32, host_only=True)
        assert host_src.host_only and not inst.allocate((1,)).host_only
        host_src[:] = np.arange(count, dtype=np.int32) * (rank + 1)
        inst.allreduce(host_src, host_dst, count, ACCLReduceFunctions.MAX)
        maxima = host_dst.copy()
        # Device memory with explicit syncs: data written to the session and read back.
        dev = inst.allocate((count,))
        dev[:] = rank + 0.5
        dev.sync_to_device()
        dev[:] = -1
        dev.sync_from_device()
        roundtrip = dev.copy()
        # A chain whose second call reads the first one's result in the session's device memory.
        src, mid, out = (inst.allocate((count,)) for _ in range(3))
        src[:] = np.arange(count, dtype=np.float32) + 10 * rank
        first = inst.allreduce(src, mid, count, ACCLReduceFunctions.SUM, to_fpga=True, run_async=True)
        inst.copy(mid, out, count, from_fpga=True, waitfor=[first])
        first.wait()
        return maxima, roundtrip, out.copy()

    for rank, (maxima, roundtrip, chained) in enumerate(run_ranks(instances, rank_fn)):
        np.testing.assert_array_equal(maxima, np.arange(count) * WORLD_SIZE)
        np.testing.assert_array_equal(roundtrip, rank + 0.5)
        np.testing.assert_array_equal(chained, sum(np.arange(count) + 10 * r for r in range(WORLD_SIZE)))


def main():
    cclo_emu, peer_dir, log_dir = sys.argv[1:4]
    if not os.access(cclo_emu, os.X_OK):
        if not os.path.isfile(os.path.join(peer_dir, "build.sh")):
            print(f"SKIP: no public ACCL at '{peer_dir}' (../shared/peers/accl-public beside the repository), "
                  "so public cclo_emu cannot be built")
        else:
            print(f"SKIP: public cclo_emu not built at '{cclo_emu}' (build it: ninja -C <builddir> accl-public-emu)")
        return 77
    session = Session(cclo_emu, log_dir)
    namespace = {"__name__": "__seed000__"}
    try:
        started = time.monotonic()
        for index, cell in enumerate(seed000_cells(session.base)):
            exec(compile(cell, f"<seed 000 cell {index}>", "exec"), namespace)
        print(f"seed 000 cells: allreduce of {namespace['COUNT']} floats on {WORLD_SIZE} cclo_emu instances "
              f"checked, {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        buffers_and_chains(namespace["accl_instances"])
        print(f"host-only and device buffers, MAX, waitfor chain checked, {time.monotonic() - started:.1f} s")
        for inst in namespace["accl_instances"]:
            inst.deinit()
        session.check_running()
    except BaseException:
        for log in session.logs:
            with open(log, errors="replace") as f:
                print(f"---- {log} (tail)\n{''.join(f.readlines()[-20:])}", file=sys.stderr)
        raise
    finally:
        namespace.clear()
        session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

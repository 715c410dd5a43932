# SPDX-License-Identifier: Apache-2.0
"""Seed 001 ("Using ACCL"): the four configuration calls (setup_rx_buffers, configure_communicator,
open_port, open_con) and chaining with ``waitfor=``, on the bundled emulator.

Seed 001 writes ``async=``, a keyword since Python 3.7; seed 003 (and pyaccl) call it ``run_async``.
"""

import inspect
import re
import threading

import numpy as np
import pytest

import pyaccl
from conftest import CALL_TIMEOUT_S, World
from pyaccl import ACCLReduceFunctions, accl

SUM = ACCLReduceFunctions.SUM


@pytest.fixture
def pair():
    world = World(size=2)
    yield world
    world.close()


def _rx_table(inst):
    """(count, bytes) from the first line of dump_rx_buffers()."""
    match = re.match(r"RX buffers: (\d+) of (\d+) bytes", inst.dump_rx_buffers())
    assert match, inst.dump_rx_buffers()
    return int(match.group(1)), int(match.group(2))


# --------------------------------------------------------------- configuration calls


def test_setup_call_signatures():
    def params(name):
        return [(p.name, p.default) for p in inspect.signature(getattr(accl, name)).parameters.values()][1:]
    assert params("setup_rx_buffers") == [("nbufs", 16), ("bufsize", 1024), ("devicemem", None)]
    assert params("configure_communicator") == [("ranks", inspect.Parameter.empty),
                                                ("local_rank", inspect.Parameter.empty)]
    assert params("open_port") == [("comm_id", 0)] and params("open_con") == [("comm_id", 0)]


def test_seed001_program_on_the_emulator(pair):
    """Seed 001's snippets in order: configure, send/recv between host and device memory, then an
    asynchronous allreduce whose handle the allgather waits for."""
    bs = 16384
    count = 256

    def configure(rank, inst):
        ranks_dict = [dict(r) for r in inst.ranks]
        inst.setup_rx_buffers(nbufs=16, bufsize=bs, devicemem=0)
        inst.configure_communicator(ranks_dict, rank)
        inst.open_port()
        inst.open_con()
        assert _rx_table(inst) == (16, bs)
        assert inst.bufsize == bs

    def communicate(rank, inst):
        txb, rxb = inst.allocate((bs,)), inst.allocate((bs,))
        txb[:] = np.arange(bs, dtype=np.float32) + 1000 * rank
        if rank == 0:
            inst.recv(rxb, count, src=1, tag=1, to_fpga=False, run_async=False)
            np.testing.assert_array_equal(rxb[:count], np.arange(count) + 1000)
        else:
            txb.sync_to_device()
            inst.send(txb, count, dst=0, tag=1, from_fpga=True, run_async=False)

        gathered = inst.allocate((2 * count,))
        ch = inst.allreduce(txb, rxb, count=count, func=SUM, from_fpga=False, to_fpga=True, run_async=True)
        # The allgather sends the allreduce's result straight from device memory: without the chain it
        # would read the buffer before the allreduce wrote it.
        inst.allgather(rxb, gathered, count=count, from_fpga=True, to_fpga=False, waitfor=[ch], run_async=False)
        ch.wait()
        return gathered.copy()

    # Reconfiguring resets a CCLO, dropping what peers sent it before: every rank finishes
    # configuring before any communicates (on a cluster: an MPI barrier between the two).
    pair.run(configure)
    expected_sum = 2 * np.arange(count) + 1000
    for got in pair.run(communicate):
        np.testing.assert_array_equal(got, np.concatenate([expected_sum, expected_sum]))


def _check_allreduce_after(pair, configure, count):
    """configure(rank, inst) on both ranks, then a SUM allreduce of count floats (rank + 1 on each rank)
    that must give 3 everywhere: the call works under what configure set."""
    def rank_fn(rank, inst):
        sbuf, rbuf = inst.allocate((count,)), inst.allocate((count,))
        sbuf[:] = rank + 1
        inst.allreduce(sbuf, rbuf, count, SUM)
        return rbuf.copy()

    pair.run(configure)
    for got in pair.run(rank_fn):
        np.testing.assert_array_equal(got, 3)


def test_setup_rx_buffers_reconfigures_only_on_change(pair):
    def configure(rank, inst):
        inst.setup_rx_buffers()  # the constructor's values: nothing happens
        assert _rx_table(inst) == (16, 1024)
        inst.setup_rx_buffers(nbufs=4, bufsize=4096)
        assert _rx_table(inst) == (4, 4096)

    _check_allreduce_after(pair, configure, 1000)  # 4000 bytes: eager in 4 KiB buffers


def test_configure_communicator_changes_what_the_emulator_allows(pair):
    def configure(rank, inst):
        same = [(r["ip"], r["port"]) for r in inst.ranks]
        inst.configure_communicator(same, rank)  # same endpoints, same defaults: nothing happens
        changed = [dict(r, max_segment_size=512) for r in inst.ranks]
        inst.configure_communicator(changed, rank)
        assert inst.dump_communicator().count("max-segment 512") == 2

    _check_allreduce_after(pair, configure, 300)  # 1200 bytes: 3 segments of 512


def test_setup_calls_reject_bad_arguments(pair):
    inst = pair.instances[0]
    bad_setup = [dict(nbufs=0), dict(bufsize=0), dict(bufsize=1.5), dict(nbufs="4"), dict(devicemem=1),
                 dict(devicemem=True)]
    for kwargs in bad_setup:
        with pytest.raises(pyaccl.ACCLArgumentError, match="setup_rx_buffers"):
            inst.setup_rx_buffers(**kwargs)
    moved = [dict(r) for r in inst.ranks]
    moved[1]["port"] += 1
    for ranks, rank in [(inst.ranks[:1], 0), (inst.ranks, 1), (inst.ranks, -1), ("127.0.0.1:5500", 0),
                        (moved, 0), ([("127.0.0.1", "x"), ("127.0.0.1", 1)], 0)]:
        with pytest.raises(pyaccl.ACCLArgumentError, match="configure_communicator|ranks"):
            inst.configure_communicator(ranks, rank)
    for call in (inst.open_port, inst.open_con):
        call()
        call(comm_id=0)
        for comm_id in (7, -1, "0"):
            with pytest.raises(pyaccl.ACCLArgumentError, match=call.__name__):
                call(comm_id=comm_id)
    assert _rx_table(inst) == (16, 1024)  # nothing was reconfigured


def test_reconfiguring_is_refused_while_calls_run(pair):
    """A reconfiguration while an asynchronous call runs would reset the CCLO under it: refused."""
    inst, peer = pair.instances
    buf = inst.allocate((4,))
    handle = inst.recv(buf, 4, src=1, tag=9, run_async=True)  # runs until the peer sends below
    with pytest.raises(pyaccl.ACCLArgumentError, match="still running"):
        inst.setup_rx_buffers(nbufs=8, bufsize=2048)
    src = peer.allocate((4,))
    src[:] = 5
    peer.send(src, 4, dst=0, tag=9)
    handle.wait()
    np.testing.assert_array_equal(buf, 5)
    inst.setup_rx_buffers(nbufs=8, bufsize=2048)
    assert _rx_table(inst) == (8, 2048)
    # set_timeout (the World's) survives the reconfiguration.
    assert inst._driver.timeout_us == int(CALL_TIMEOUT_S * 1_000_000)


# --------------------------------------------------------------- chaining


def test_every_call_takes_waitfor():
    calls = ["nop", "copy", "combine", "send", "recv", "bcast", "scatter", "gather", "allgather", "reduce",
             "allreduce", "reduce_scatter", "alltoall", "barrier"]
    for name in calls:
        params = inspect.signature(getattr(accl, name)).parameters
        assert "waitfor" in params and params["waitfor"].default is None, name


def test_a_chain_waits_for_a_receive(pair):
    """A chain issued before its data exists: receive, copy the received data, add both. On this
    device other calls overtake a waiting receive, so only the chain keeps copy and combine back
    until the message is there; without it they would work on stale memory."""
    count = 500
    chain_issued = threading.Event()

    def rank_fn(rank, inst):
        if rank == 1:
            src = inst.allocate((count,), dtype=np.int64)
            src[:] = (1 << 33) + np.arange(count)
            assert chain_issued.wait(timeout=30)
            inst.send(src, count, dst=0, tag=4)
            return None
        inbuf, mid, out = (inst.allocate((count,), dtype=np.int64) for _ in range(3))
        out[:] = -1
        received = inst.recv(inbuf, count, src=1, tag=4, to_fpga=True, run_async=True)
        copied = inst.copy(inbuf, mid, count, from_fpga=True, to_fpga=True, run_async=True, waitfor=[received])
        added = inst.combine(count, SUM, inbuf, mid, out, val1_from_fpga=True, val2_from_fpga=True,
                             run_async=True, waitfor=(copied,))
        pending = (copied.done(), added.done())
        chain_issued.set()
        inst.nop(waitfor=[added])  # a synchronous call at the end of the chain
        assert received.test() and copied.test() and added.test()
        return pending, out.copy()

    (pending, got), _ = pair.run(rank_fn)
    assert pending == (False, False), "a chained call ran before the receive it waits for"
    np.testing.assert_array_equal(got, 2 * ((1 << 33) + np.arange(count)))


def test_chained_collectives(pair):
    def rank_fn(rank, inst):
        sbuf, mid, res = inst.allocate((64,)), inst.allocate((64,)), inst.allocate((64,))
        sbuf[:] = rank + 1
        reduced = inst.allreduce(sbuf, mid, 64, SUM, to_fpga=True, run_async=True)
        bcast = inst.bcast(mid, 64, root=1, from_fpga=True, to_fpga=True, run_async=True, waitfor=[reduced])
        inst.reduce(mid, res, 64, root=0, func=SUM, from_fpga=True, waitfor=[bcast])
        inst.barrier(waitfor=[reduced, bcast])
        return res.copy() if rank == 0 else None

    got = pair.run(rank_fn)[0]
    np.testing.assert_array_equal(got, 2 * 3)


def test_waitfor_errors(pair):
    first, second = pair.instances
    buf = first.allocate((4,))
    handle = first.nop(run_async=True)
    for waitfor in (handle, [handle, None], [3], "h"):
        with pytest.raises(pyaccl.ACCLArgumentError, match="waitfor"):
            first.copy(buf, buf, 4, waitfor=waitfor)
    foreign = second.nop(run_async=True)
    with pytest.raises(pyaccl.ACCLArgumentError, match="another ACCL instance"):
        first.nop(waitfor=[foreign])
    handle.wait()
    foreign.wait()


def test_a_failed_dependency_is_reported_by_the_chain(pair):
    inst = pair.instances[0]
    inst.set_timeout(0.5)
    buf = inst.allocate((4,))
    doomed = inst.recv(buf, 4, src=1, tag=77, run_async=True)  # nobody sends
    after = inst.nop(run_async=True, waitfor=[doomed])
    with pytest.raises(pyaccl.ACCLDeviceError, match="RECEIVE_TIMEOUT_ERROR"):
        after.wait()
    with pytest.raises(pyaccl.ACCLDeviceError):
        doomed.wait()
    inst.set_timeout(CALL_TIMEOUT_S)

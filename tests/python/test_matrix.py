# SPDX-License-Identifier: Apache-2.0
"""Every call of seed 003 over counts x data types x roots, on one world of
WORLD emulated ranks driven from one thread per rank.

Data are small integers so float16 sums and the float32 -> float16 wire
compression are exact and results can be compared for equality.
"""

import numpy as np
import pytest

from conftest import WORLD
from pyaccl import ACCLReduceFunctions

COUNTS = [1, 16, 21, 128]
DTYPES = [np.float32, np.float16, np.int32, np.int64]
ROOTS = list(range(WORLD))

count_param = pytest.mark.parametrize("count", COUNTS)
dtype_param = pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
root_param = pytest.mark.parametrize("root", ROOTS)


def data(rank, count, dtype, salt=0):
    """Distinct per rank and element, exact in every tested type (including float16 sums of WORLD values)."""
    return ((np.arange(count) * 7 + rank * 3 + salt) % 61 + 1).astype(dtype)


def filled(inst, rank, count, dtype, salt=0):
    buf = inst.allocate((count,), dtype=dtype)
    buf[:] = data(rank, count, dtype, salt)
    return buf


def sentinel(inst, count, dtype):
    """A result buffer pre-filled with a value no call produces, so untouched elements show."""
    buf = inst.allocate((count,), dtype=dtype)
    buf[:] = -1
    return buf


def all_data(count, dtype, salt=0):
    return [data(r, count, dtype, salt) for r in range(WORLD)]


def run_into_sentinel(world, send_count, recv_count, dtype, call):
    """Every rank runs call(inst, sbuf, rbuf) from its data (send_count elements) into a sentinel buffer of
    recv_count elements; returns each rank's rbuf."""
    def rank_fn(rank, inst):
        sbuf = filled(inst, rank, send_count, dtype)
        rbuf = sentinel(inst, recv_count, dtype)
        call(inst, sbuf, rbuf)
        return rbuf.copy()

    return world.run(rank_fn)


# --------------------------------------------------------------- primitives


@count_param
@dtype_param
def test_copy(world, count, dtype):
    def rank_fn(rank, inst):
        src, dst = filled(inst, rank, count, dtype), sentinel(inst, count, dtype)
        inst.copy(src, dst, count)
        return dst.copy()

    for rank, got in enumerate(world.run(rank_fn)):
        np.testing.assert_array_equal(got, data(rank, count, dtype))


@count_param
@dtype_param
def test_combine(world, count, dtype):
    def rank_fn(rank, inst):
        a, b = filled(inst, rank, count, dtype), filled(inst, rank, count, dtype, salt=5)
        res = sentinel(inst, count, dtype)
        inst.combine(count, ACCLReduceFunctions.SUM, a, b, res)
        return res.copy()

    for rank, got in enumerate(world.run(rank_fn)):
        np.testing.assert_array_equal(got, data(rank, count, dtype) + data(rank, count, dtype, salt=5))


@count_param
@dtype_param
def test_send_recv_ring(world, count, dtype):
    def rank_fn(rank, inst):
        src, dst = filled(inst, rank, count, dtype), sentinel(inst, count, dtype)
        # Receive first (async) so large (rendezvous) sends find their receiver.
        pending = inst.recv(dst, count, (rank - 1) % WORLD, tag=7, run_async=True)
        inst.send(src, count, (rank + 1) % WORLD, tag=7)
        pending.wait()
        return dst.copy()

    for rank, got in enumerate(world.run(rank_fn)):
        np.testing.assert_array_equal(got, data((rank - 1) % WORLD, count, dtype))


# --------------------------------------------------------------- collectives


@count_param
@dtype_param
@root_param
def test_bcast(world, count, dtype, root):
    def rank_fn(rank, inst):
        buf = filled(inst, rank, count, dtype) if rank == root else sentinel(inst, count, dtype)
        inst.bcast(buf, count, root)
        return buf.copy()

    for got in world.run(rank_fn):
        np.testing.assert_array_equal(got, data(root, count, dtype))


@count_param
@dtype_param
@root_param
def test_scatter(world, count, dtype, root):
    sent = data(root, count * WORLD, dtype)
    results = run_into_sentinel(world, count * WORLD, count, dtype,
                                lambda inst, sbuf, rbuf: inst.scatter(sbuf, rbuf, count, root))
    for rank, got in enumerate(results):
        np.testing.assert_array_equal(got, sent[rank * count:(rank + 1) * count])


@count_param
@dtype_param
@root_param
def test_gather(world, count, dtype, root):
    results = run_into_sentinel(world, count, count * WORLD, dtype,
                                lambda inst, sbuf, rbuf: inst.gather(sbuf, rbuf, count, root))
    np.testing.assert_array_equal(results[root], np.concatenate(all_data(count, dtype)))


@count_param
@dtype_param
def test_allgather(world, count, dtype):
    results = run_into_sentinel(world, count, count * WORLD, dtype,
                                lambda inst, sbuf, rbuf: inst.allgather(sbuf, rbuf, count))
    for got in results:
        np.testing.assert_array_equal(got, np.concatenate(all_data(count, dtype)))


@count_param
@dtype_param
@root_param
def test_reduce(world, count, dtype, root):
    results = run_into_sentinel(world, count, count, dtype,
                                lambda inst, sbuf, rbuf: inst.reduce(sbuf, rbuf, count, root, ACCLReduceFunctions.SUM))
    np.testing.assert_array_equal(results[root], np.sum(all_data(count, dtype), axis=0, dtype=dtype))


@count_param
@dtype_param
def test_allreduce(world, count, dtype):
    results = run_into_sentinel(world, count, count, dtype,
                                lambda inst, sbuf, rbuf: inst.allreduce(sbuf, rbuf, count, ACCLReduceFunctions.SUM))
    for got in results:
        np.testing.assert_array_equal(got, np.sum(all_data(count, dtype), axis=0, dtype=dtype))


@count_param
@dtype_param
def test_reduce_scatter(world, count, dtype):
    total = np.sum(all_data(count * WORLD, dtype), axis=0, dtype=dtype)
    results = run_into_sentinel(world, count * WORLD, count, dtype,
                                lambda inst, sbuf, rbuf: inst.reduce_scatter(sbuf, rbuf, count,
                                                                             ACCLReduceFunctions.SUM))
    for rank, got in enumerate(results):
        np.testing.assert_array_equal(got, total[rank * count:(rank + 1) * count])


@count_param
@dtype_param
def test_alltoall(world, count, dtype):
    sent = all_data(count * WORLD, dtype)
    results = run_into_sentinel(world, count * WORLD, count * WORLD, dtype,
                                lambda inst, sbuf, rbuf: inst.alltoall(sbuf, rbuf, count))
    for rank, got in enumerate(results):
        expected = np.concatenate([sent[src][rank * count:(rank + 1) * count] for src in range(WORLD)])
        np.testing.assert_array_equal(got, expected)


def test_barrier_and_nop(world):
    def rank_fn(rank, inst):
        inst.nop()
        inst.barrier()
        inst.nop(run_async=True).wait()
        return rank

    assert world.run(rank_fn) == list(range(WORLD))


# --------------------------------------------------------------- reduce functions


REDUCE_EXPECTED = {
    ACCLReduceFunctions.SUM: lambda rows, t: np.sum(rows, axis=0, dtype=t),
    ACCLReduceFunctions.MAX: lambda rows, t: np.max(rows, axis=0),
    ACCLReduceFunctions.MIN: lambda rows, t: np.min(rows, axis=0),
    ACCLReduceFunctions.PROD: lambda rows, t: np.prod(rows, axis=0, dtype=t),
}


ARITHMETIC = [ACCLReduceFunctions.SUM, ACCLReduceFunctions.MAX, ACCLReduceFunctions.MIN, ACCLReduceFunctions.PROD]


@pytest.mark.parametrize("func", ARITHMETIC, ids=lambda f: f.name)
@dtype_param
def test_allreduce_functions(world, func, dtype):
    if not world.instances[0].supports(func):
        pytest.skip(f"{func.name} is not supported by this CCLO")
    count = 21

    # Values 1..4 keep PROD of WORLD ranks exact in float16.
    def small(rank):
        return ((np.arange(count) + rank) % 4 + 1).astype(dtype)

    def rank_fn(rank, inst):
        sbuf = inst.allocate((count,), dtype=dtype)
        sbuf[:] = small(rank)
        rbuf = sentinel(inst, count, dtype)
        inst.allreduce(sbuf, rbuf, count, func)
        return rbuf.copy()

    expected = REDUCE_EXPECTED[func](np.array([small(r) for r in range(WORLD)]), dtype)
    for got in world.run(rank_fn):
        np.testing.assert_array_equal(got, expected)


INTEGER_EXPECTED = {
    ACCLReduceFunctions.SUM: lambda rows: np.sum(rows, axis=0, dtype=rows.dtype),
    ACCLReduceFunctions.MAX: lambda rows: np.max(rows, axis=0),
    ACCLReduceFunctions.MIN: lambda rows: np.min(rows, axis=0),
    ACCLReduceFunctions.PROD: lambda rows: np.prod(rows, axis=0, dtype=rows.dtype),
    ACCLReduceFunctions.BAND: lambda rows: np.bitwise_and.reduce(rows, axis=0),
    ACCLReduceFunctions.BOR: lambda rows: np.bitwise_or.reduce(rows, axis=0),
    ACCLReduceFunctions.BXOR: lambda rows: np.bitwise_xor.reduce(rows, axis=0),
    ACCLReduceFunctions.LAND: lambda rows: np.logical_and.reduce(rows != 0, axis=0).astype(rows.dtype),
    ACCLReduceFunctions.LOR: lambda rows: np.logical_or.reduce(rows != 0, axis=0).astype(rows.dtype),
    ACCLReduceFunctions.LXOR: lambda rows: np.logical_xor.reduce(rows != 0, axis=0).astype(rows.dtype),
}


@pytest.mark.parametrize("func", list(INTEGER_EXPECTED), ids=lambda f: f.name)
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.uint64, np.int32],
                         ids=lambda t: np.dtype(t).name)
def test_allreduce_integer_functions(world, func, dtype):
    """The extension types and ops: wrap-around at the type's width, unsigned order, logical 0/1."""
    if not world.instances[0].supports(func, dtype):
        pytest.skip(f"{func.name} on {np.dtype(dtype).name} is not supported by this CCLO")
    count = 37
    info = np.iinfo(dtype)

    def values(rank):
        v = ((np.arange(count, dtype=np.int64) * 37 + rank * 11) % 120).astype(dtype)
        v[::5] = 0  # zeros for the logical ops
        v[1::7] = dtype(info.max)  # sums and products wrap
        v[2::7] = dtype(info.min)
        return v

    def rank_fn(rank, inst):
        sbuf = inst.allocate((count,), dtype=dtype)
        sbuf[:] = values(rank)
        rbuf = inst.allocate((count,), dtype=dtype)
        inst.allreduce(sbuf, rbuf, count, func)
        return rbuf.copy()

    with np.errstate(over="ignore"):
        expected = INTEGER_EXPECTED[func](np.array([values(r) for r in range(WORLD)], dtype=dtype))
    for got in world.run(rank_fn):
        np.testing.assert_array_equal(got, expected)


# --------------------------------------------------------------- compression


COMPRESSED = dict(dtype=np.float32, compress_dtype=np.float16)


@count_param
def test_compressed_send_recv(world, count):
    def rank_fn(rank, inst):
        src, dst = filled(inst, rank, count, np.float32), sentinel(inst, count, np.float32)
        pending = inst.recv(dst, count, (rank + 1) % WORLD, compress_dtype=np.float16, run_async=True)
        inst.send(src, count, (rank - 1) % WORLD, compress_dtype=np.float16)
        pending.wait()
        return dst.copy()

    for rank, got in enumerate(world.run(rank_fn)):
        np.testing.assert_array_equal(got, data((rank + 1) % WORLD, count, np.float32))


@count_param
@root_param
def test_compressed_bcast(world, count, root):
    def rank_fn(rank, inst):
        buf = filled(inst, rank, count, np.float32) if rank == root else sentinel(inst, count, np.float32)
        inst.bcast(buf, count, root, compress_dtype=np.float16)
        return buf.copy()

    for got in world.run(rank_fn):
        np.testing.assert_array_equal(got, data(root, count, np.float32))


@count_param
@root_param
def test_compressed_scatter_gather(world, count, root):
    def rank_fn(rank, inst):
        sbuf = filled(inst, rank, count * WORLD, np.float32)
        part = sentinel(inst, count, np.float32)
        inst.scatter(sbuf, part, count, root, compress_dtype=np.float16)
        back = sentinel(inst, count * WORLD, np.float32)
        inst.gather(part, back, count, root, compress_dtype=np.float16)
        return part.copy(), back.copy()

    results = world.run(rank_fn)
    sent = data(root, count * WORLD, np.float32)
    for rank, (part, _) in enumerate(results):
        np.testing.assert_array_equal(part, sent[rank * count:(rank + 1) * count])
    np.testing.assert_array_equal(results[root][1], sent)


@count_param
@root_param
def test_compressed_reduce(world, count, root):
    def rank_fn(rank, inst):
        sbuf, rbuf = filled(inst, rank, count, np.float32), sentinel(inst, count, np.float32)
        inst.reduce(sbuf, rbuf, count, root, ACCLReduceFunctions.SUM, compress_dtype=np.float16)
        return rbuf.copy()

    results = world.run(rank_fn)
    np.testing.assert_array_equal(results[root], np.sum(all_data(count, np.float32), axis=0))


@count_param
def test_compressed_allgather_allreduce_reduce_scatter(world, count):
    def rank_fn(rank, inst):
        sbuf = filled(inst, rank, count * WORLD, np.float32)
        gathered = sentinel(inst, count * WORLD * WORLD, np.float32)
        inst.allgather(sbuf, gathered, count * WORLD, compress_dtype=np.float16)
        summed = sentinel(inst, count * WORLD, np.float32)
        inst.allreduce(sbuf, summed, count * WORLD, ACCLReduceFunctions.SUM, compress_dtype=np.float16)
        part = sentinel(inst, count, np.float32)
        inst.reduce_scatter(sbuf, part, count, ACCLReduceFunctions.SUM, compress_dtype=np.float16)
        return gathered.copy(), summed.copy(), part.copy()

    sent = all_data(count * WORLD, np.float32)
    total = np.sum(sent, axis=0)
    for rank, (gathered, summed, part) in enumerate(world.run(rank_fn)):
        np.testing.assert_array_equal(gathered, np.concatenate(sent))
        np.testing.assert_array_equal(summed, total)
        np.testing.assert_array_equal(part, total[rank * count:(rank + 1) * count])


# --------------------------------------------------------------- split communicators


@pytest.fixture
def halves(world):
    """Two communicators of two ranks: evens [0, 2] and odds in reverse order [3, 1].

    Every rank splits (in the same order), so later communicators of all
    ranks keep matching context ids."""
    groups = {0: [0, 2], 2: [0, 2], 1: [3, 1], 3: [3, 1]}
    comms = world.run(lambda rank, inst: inst.split_communicator(groups[rank]))
    yield groups, comms
    world.run(lambda rank, inst: inst.free_communicator(comms[rank]))


@count_param
@dtype_param
def test_split_communicator_allreduce_and_bcast(world, halves, count, dtype):
    groups, comms = halves

    def rank_fn(rank, inst):
        comm = comms[rank]
        sub_rank = groups[rank].index(rank)
        assert inst.get_comm_rank(comm) == sub_rank and inst.get_comm_size(comm) == 2
        sbuf, rbuf = filled(inst, rank, count, dtype), sentinel(inst, count, dtype)
        inst.allreduce(sbuf, rbuf, count, ACCLReduceFunctions.SUM, comm_id=comm)
        buf = filled(inst, rank, count, dtype, salt=9) if sub_rank == 1 else sentinel(inst, count, dtype)
        inst.bcast(buf, count, 1, comm_id=comm)
        return rbuf.copy(), buf.copy()

    for rank, (summed, bcasted) in enumerate(world.run(rank_fn)):
        members = groups[rank]
        np.testing.assert_array_equal(summed, np.sum([data(m, count, dtype) for m in members], axis=0, dtype=dtype))
        np.testing.assert_array_equal(bcasted, data(members[1], count, dtype, salt=9))


@count_param
@pytest.mark.parametrize("sub_root", [0, 1])
def test_split_communicator_rooted_calls(world, halves, count, sub_root):
    groups, comms = halves
    dtype = np.float32

    def rank_fn(rank, inst):
        comm = comms[rank]
        sbuf = filled(inst, rank, count * 2, dtype)
        part = sentinel(inst, count, dtype)
        inst.scatter(sbuf, part, count, sub_root, comm_id=comm)
        gathered = sentinel(inst, count * 2, dtype)
        inst.gather(part, gathered, count, sub_root, comm_id=comm)
        reduced = sentinel(inst, count, dtype)
        inst.reduce(part, reduced, count, sub_root, ACCLReduceFunctions.SUM, comm_id=comm,
                    compress_dtype=np.float16)
        pending = inst.recv(sentinel(inst, 1, dtype), 1, 1 - groups[rank].index(rank), comm_id=comm, run_async=True)
        inst.send(sbuf, 1, 1 - groups[rank].index(rank), comm_id=comm)
        pending.wait()
        inst.barrier(comm_id=comm)
        return part.copy(), gathered.copy(), reduced.copy()

    results = world.run(rank_fn)
    for rank, (part, gathered, reduced) in enumerate(results):
        members = groups[rank]
        root_global = members[sub_root]
        sent = data(root_global, count * 2, dtype)
        sub_rank = members.index(rank)
        np.testing.assert_array_equal(part, sent[sub_rank * count:(sub_rank + 1) * count])
        if rank == root_global:
            np.testing.assert_array_equal(gathered, sent)
            np.testing.assert_array_equal(reduced, sent[:count] + sent[count:])


# --------------------------------------------------------------- larger messages


@pytest.mark.parametrize("count", [1000, 4096, 20000])
def test_large_messages(world, count):
    """Past the eager size (bufsize): rendezvous and segmentation."""
    dtype = np.float32

    def rank_fn(rank, inst):
        sbuf, rbuf = filled(inst, rank, count, dtype), sentinel(inst, count, dtype)
        inst.allreduce(sbuf, rbuf, count, ACCLReduceFunctions.SUM)
        buf = filled(inst, rank, count, dtype) if rank == 2 else sentinel(inst, count, dtype)
        inst.bcast(buf, count, 2)
        gathered = sentinel(inst, count * WORLD, dtype)
        inst.allgather(sbuf, gathered, count)
        return rbuf.copy(), buf.copy(), gathered.copy()

    for summed, bcasted, gathered in world.run(rank_fn):
        np.testing.assert_array_equal(summed, np.sum(all_data(count, dtype), axis=0))
        np.testing.assert_array_equal(bcasted, data(2, count, dtype))
        np.testing.assert_array_equal(gathered, np.concatenate(all_data(count, dtype)))

# SPDX-License-Identifier: Apache-2.0
"""The seed 003 API surface (module layout, names, signatures, constants)
and the behaviour around the calls: buffers, syncs, async handles, errors,
sim_mode world discovery, device selection."""

import importlib
import inspect
import socket
import threading

import numpy as np
import pytest

import pyaccl
from conftest import WORLD
from port_blocks import block_is_free
from pyaccl import ACCLReduceFunctions, accl
from pyaccl.buffer import ACCLBuffer
from pyaccl.constants import ACCLCompressionFlags, ACCLStreamFlags, ErrorCode

# --------------------------------------------------------------- layout and names


def test_module_layout():
    accl_module = importlib.import_module("pyaccl.accl")
    assert accl_module.accl is accl
    assert pyaccl.accl.accl is accl  # seed 003 spelling, through the package attribute
    assert pyaccl.accl.ACCLArithConfig is accl_module.ACCLArithConfig
    from pyaccl.accl import ACCLArithConfig, accl as accl_class
    assert accl_class is accl and ACCLArithConfig is pyaccl.ACCLArithConfig
    assert importlib.import_module("pyaccl.buffer").ACCLBuffer is ACCLBuffer
    assert issubclass(ACCLBuffer, np.ndarray)
    constants = importlib.import_module("pyaccl.constants")
    for name in ("ACCLReduceFunctions", "ACCLCompressionFlags", "ACCLStreamFlags", "ErrorCode"):
        assert getattr(constants, name) is getattr(pyaccl, name)


def _params(func):
    """[(name, default)] without self; inspect.Parameter.empty for required ones."""
    return [(p.name, p.default) for p in inspect.signature(func).parameters.values() if p.name != "self"]


E = inspect.Parameter.empty
CALL_TAIL = [("comm_id", 0), ("from_fpga", False), ("to_fpga", False), ("compress_dtype", None), ("run_async", False)]
SEED_SIGNATURES = {
    "allocate": [("shape", E), ("dtype", np.float32), ("physical_address", None), ("prealloc", True)],
    "copy": [("srcbuf", E), ("dstbuf", E), ("count", E), ("from_fpga", False), ("to_fpga", False),
             ("run_async", False)],
    "combine": [("count", E), ("func", E), ("val1", E), ("val2", E), ("result", E), ("val1_from_fpga", False),
                ("val2_from_fpga", False), ("to_fpga", False), ("run_async", False)],
    "send": [("srcbuf", E), ("count", E), ("dst", E), ("tag", 4294967295), ("comm_id", 0), ("from_fpga", False),
             ("compress_dtype", None), ("stream_flags", ACCLStreamFlags.NO_STREAM), ("run_async", False)],
    "recv": [("dstbuf", E), ("count", E), ("src", E), ("tag", 4294967295), ("comm_id", 0), ("to_fpga", False),
             ("compress_dtype", None), ("run_async", False)],
    "bcast": [("buf", E), ("count", E), ("root", E)] + CALL_TAIL,
    "scatter": [("sbuf", E), ("rbuf", E), ("count", E), ("root", E)] + CALL_TAIL,
    "gather": [("sbuf", E), ("rbuf", E), ("count", E), ("root", E)] + CALL_TAIL,
    "allgather": [("sbuf", E), ("rbuf", E), ("count", E)] + CALL_TAIL,
    "reduce": [("sbuf", E), ("rbuf", E), ("count", E), ("root", E), ("func", E)] + CALL_TAIL,
    "allreduce": [("sbuf", E), ("rbuf", E), ("count", E), ("func", E)] + CALL_TAIL,
    "reduce_scatter": [("sbuf", E), ("rbuf", E), ("count", E), ("func", E)] + CALL_TAIL,
    "barrier": [("comm_id", 0)],
    "nop": [("run_async", False)],
    "split_communicator": [("indices", E)],
    "deinit": [],
}


@pytest.mark.parametrize("method", sorted(SEED_SIGNATURES))
def test_method_signatures_match_seed(method):
    params = _params(getattr(accl, method))
    seed = SEED_SIGNATURES[method]
    assert params[:len(seed)] == seed
    # Extensions may only add optional arguments after the seed's.
    assert all(default is not E for _, default in params[len(seed):])


def test_constructor_signature_matches_seed():
    params = dict(_params(accl.__init__))
    assert list(params) == ["nranks", "local_rank", "ranks", "protocol", "nbufs", "bufsize", "arith_config",
                            "sim_mode", "xclbin", "sim_sock", "board_idx", "cclo_idx"]
    assert params["nranks"] is E and params["local_rank"] is E
    assert (params["ranks"], params["protocol"], params["nbufs"], params["bufsize"]) == (None, None, 16, 1024)
    assert (params["sim_mode"], params["xclbin"], params["sim_sock"], params["board_idx"],
            params["cclo_idx"]) == (False, None, None, None, 0)
    # seed 003's six, then this implementation's integer types
    assert set(params["arith_config"]) == {("float16", "float16"), ("float32", "float16"), ("float32", "float32"),
                                           ("float64", "float64"), ("int32", "int32"), ("int64", "int64"),
                                           ("int8", "int8"), ("uint8", "uint8"), ("int16", "int16"),
                                           ("uint16", "uint16"), ("uint32", "uint32"), ("uint64", "uint64")}
    compressed = params["arith_config"][("float32", "float16")]
    assert isinstance(compressed, pyaccl.ACCLArithConfig)
    assert (compressed.uncompressed_elem_bytes, compressed.compressed_elem_bytes) == (4, 2)
    assert compressed.arith_is_compressed
    assert list(inspect.signature(pyaccl.ACCLArithConfig).parameters) == [
        "uncompressed_elem_bytes", "compressed_elem_bytes", "elem_ratio_log", "compressor_tdest",
        "decompressor_tdest", "arith_is_compressed", "arith_tdest"]
    assert list(inspect.signature(ACCLBuffer).parameters)[:6] == [
        "shape", "dtype", "target", "zmqsocket", "physical_address", "prealloc"]


def test_constants_match_seed():
    # seed 003's four, then this implementation's extensions
    assert [(f.name, int(f)) for f in ACCLReduceFunctions] == [
        ("SUM", 0), ("MAX", 1), ("MIN", 2), ("PROD", 3), ("BAND", 4), ("BOR", 5), ("BXOR", 6), ("LAND", 7),
        ("LOR", 8), ("LXOR", 9), ("MINLOC", 10), ("MAXLOC", 11)]
    assert {f.name: int(f) for f in ACCLCompressionFlags} == {
        "NO_COMPRESSION": 0, "OP0_COMPRESSED": 1, "OP1_COMPRESSED": 2, "RES_COMPRESSED": 4, "ETH_COMPRESSED": 8}
    assert {f.name: int(f) for f in ACCLStreamFlags} == {"NO_STREAM": 0, "OP0_STREAM": 1, "RES_STREAM": 2}
    seed_error_codes = {
        "ARITH_ERROR": 524288, "COLLECTIVE_NOT_IMPLEMENTED": 16384, "COMPRESSION_ERROR": 4194304,
        "CONFIG_SWITCH_ERROR": 256, "DEQUEUE_BUFFER_SPARE_BUFFER_DMATAG_MISMATCH": 4096,
        "DEQUEUE_BUFFER_SPARE_BUFFER_INDEX_ERROR": 8192, "DEQUEUE_BUFFER_SPARE_BUFFER_STATUS_ERROR": 1024,
        "DEQUEUE_BUFFER_TIMEOUT_ERROR": 512, "DMA_DECODE_ERROR": 4, "DMA_INTERNAL_ERROR": 2,
        "DMA_MISMATCH_ERROR": 1, "DMA_NOT_END_OF_PACKET_ERROR": 32, "DMA_NOT_EXPECTED_BTT_ERROR": 64,
        "DMA_NOT_OKAY_ERROR": 16, "DMA_SIZE_ERROR": 262144, "DMA_SLAVE_ERROR": 8, "DMA_TAG_MISMATCH_ERROR": 67108864,
        "DMA_TIMEOUT_ERROR": 128, "KRNL_STS_COUNT_ERROR": 16777216, "KRNL_TIMEOUT_STS_ERROR": 8388608,
        "OPEN_CON_NOT_SUCCEEDED": 131072, "OPEN_PORT_NOT_SUCCEEDED": 65536, "PACK_SEQ_NUMBER_ERROR": 2097152,
        "PACK_TIMEOUT_STS_ERROR": 1048576, "RECEIVE_OFFCHIP_SPARE_BUFF_ID_NOT_VALID": 32768,
        "RECEIVE_TIMEOUT_ERROR": 2048, "SEGMENTER_EXPECTED_BTT_ERROR": 33554432,
    }
    for name, value in seed_error_codes.items():
        assert int(ErrorCode[name]) == value
        assert ErrorCode(value).name == name  # the seed's name is canonical for its bit
    assert pyaccl.TAG_ANY == 4294967295


def test_error_classes():
    assert issubclass(pyaccl.ACCLArgumentError, ValueError)
    assert issubclass(pyaccl.ACCLTimeoutError, TimeoutError)
    for cls in (pyaccl.ACCLArgumentError, pyaccl.ACCLTimeoutError, pyaccl.ACCLDeviceError):
        assert issubclass(cls, pyaccl.ACCLError)


# --------------------------------------------------------------- buffers and syncs


def test_buffers_are_numpy_arrays_over_device_memory(world):
    inst = world.instances[0]
    a = inst.allocate((4, 8), dtype=np.int32)
    b = inst.allocate((32,), dtype=np.int32)
    assert isinstance(a, ACCLBuffer) and isinstance(a, np.ndarray)
    assert a.shape == (4, 8) and a.dtype == np.int32
    assert isinstance(a.device_address, int) and a.device_address != b.device_address
    # A contiguous view is the matching part of the device buffer.
    assert a[1].device_address == a.device_address + 8 * 4
    a[:] = np.arange(32).reshape(4, 8)
    inst.copy(a[2], b[0:8], 8)
    np.testing.assert_array_equal(b[:8], np.arange(16, 24))
    assert (b[8:] == 0).all()


def test_from_fpga_and_to_fpga_skip_syncs(world):
    inst = world.instances[1]
    src, dst = inst.allocate((16,)), inst.allocate((16,))
    src[:] = 1.0
    src.sync_to_device()
    src[:] = 2.0  # host only: from_fpga uses the device copy (1.0)
    inst.copy(src, dst, 16, from_fpga=True)
    np.testing.assert_array_equal(dst, 1.0)
    inst.copy(src, dst, 16, to_fpga=True)  # device dst now 2.0, host dst still 1.0
    np.testing.assert_array_equal(dst, 1.0)
    dst.sync_from_device()
    np.testing.assert_array_equal(dst, 2.0)


def test_host_only_buffers(world):
    def rank_fn(rank, inst):
        sbuf = inst.allocate((10,), dtype=np.int64, host_only=True)
        rbuf = inst.allocate((10,), dtype=np.int64, host_only=True)
        assert sbuf.host_only
        sbuf[:] = rank + 1
        inst.allreduce(sbuf, rbuf, 10, ACCLReduceFunctions.SUM)
        return rbuf.copy()

    for got in world.run(rank_fn):
        np.testing.assert_array_equal(got, sum(range(1, WORLD + 1)))


def test_arrays_computed_from_buffers_are_not_device_memory(world):
    inst = world.instances[0]
    a, b = inst.allocate((8,)), inst.allocate((8,))
    with pytest.raises(pyaccl.ACCLArgumentError, match="copy"):
        inst.copy(a + 1, b, 8)
    with pytest.raises(pyaccl.ACCLArgumentError, match="contiguous"):
        inst.copy(a[::2], b, 4)
    with pytest.raises(pyaccl.ACCLArgumentError):
        inst.copy(np.zeros(8, dtype=np.float32), b, 8)
    with pytest.raises(pyaccl.ACCLArgumentError, match="not supported"):
        inst.allocate((8,), dtype=np.complex64)
    with pytest.raises(pyaccl.ACCLArgumentError, match="physical_address"):
        inst.allocate((8,), physical_address=0x1000)


def test_zero_sized_buffer_and_count(world):
    inst = world.instances[0]
    empty = inst.allocate((0,))
    assert empty.size == 0
    full = inst.allocate((4,))
    inst.copy(full, full, 0)


# --------------------------------------------------------------- counts, errors


def test_counts_may_be_integral_floats(world):
    inst = world.instances[0]
    src, dst = inst.allocate((512,)), inst.allocate((512,))
    src[:] = np.arange(512)
    inst.copy(src, dst, 1024 / 4)  # seed 002
    np.testing.assert_array_equal(dst[:256], np.arange(256))
    assert (dst[256:] == 0).all()
    inst.copy(src, dst, np.int64(512))
    np.testing.assert_array_equal(dst, np.arange(512))
    for bad in (2.5, -1, "3", True):
        with pytest.raises(pyaccl.ACCLArgumentError, match="count"):
            inst.copy(src, dst, bad)


def test_argument_errors_name_the_call(world):
    inst = world.instances[0]
    src, dst = inst.allocate((8,)), inst.allocate((8,))
    with pytest.raises(ValueError) as info:
        inst.copy(src, dst, 9)
    err = info.value
    assert isinstance(err, pyaccl.ACCLArgumentError)
    assert err.call == "copy" and err.rank == 0 and "copy" in str(err)
    with pytest.raises(pyaccl.ACCLArgumentError, match="bcast"):
        inst.bcast(src, 8, WORLD)  # root outside the communicator
    with pytest.raises(pyaccl.ACCLArgumentError, match="stream_flags"):
        inst.send(src, 8, 1, stream_flags=3)


@pytest.fixture
def pair():
    """A separate 2-rank world for calls that are meant to fail (the shared world stays clean)."""
    instances = [accl(2, i, sim_mode=True) for i in range(2)]
    for inst in instances:
        inst.set_timeout(0.2)
    yield instances
    for inst in instances:
        inst.deinit()


def test_device_errors_carry_retcode_and_error_codes(pair):
    buf = pair[0].allocate((4,))
    with pytest.raises(pyaccl.ACCLDeviceError) as info:
        pair[0].recv(buf, 4, 1)  # nobody sends: the CCLO times out
    err = info.value
    assert ErrorCode.RECEIVE_TIMEOUT_ERROR in err.error_codes
    assert err.retcode & ErrorCode.RECEIVE_TIMEOUT_ERROR
    assert err.call == "recv" and "recv" in str(err) and "RECEIVE_TIMEOUT_ERROR" in str(err)
    # The same error through an async handle.
    handle = pair[0].recv(buf, 4, 1, run_async=True)
    with pytest.raises(pyaccl.ACCLDeviceError, match="RECEIVE_TIMEOUT_ERROR"):
        handle.wait()
    assert handle.done()


def test_calls_after_deinit_fail_clearly(pair):
    buf = pair[0].allocate((4,))
    buf[:] = 3
    pair[0].deinit()
    pair[0].deinit()  # idempotent
    with pytest.raises(pyaccl.ACCLArgumentError, match="not initialized"):
        pair[0].copy(buf, buf, 4)
    np.testing.assert_array_equal(buf, 3)  # user buffers stay valid


def test_device_selection_errors():
    with pytest.raises(pyaccl.ACCLArgumentError, match="sim_mode"):
        accl(2, 0)
    with pytest.raises(pyaccl.ACCLError, match="xclbin|XRT|hardware"):
        accl(1, 0, xclbin="/nonexistent/axis3x.xclbin")
    with pytest.raises(pyaccl.ACCLArgumentError, match="local_rank"):
        accl(2, 2, sim_mode=True)
    with pytest.raises(pyaccl.ACCLArgumentError, match="protocol"):
        accl(2, 0, sim_mode=True, protocol="SCTP")


# --------------------------------------------------------------- async calls


def test_async_handles(world):
    def rank_fn(rank, inst):
        sbuf, rbuf = inst.allocate((64,)), inst.allocate((64,))
        sbuf[:] = rank
        handle = inst.allreduce(sbuf, rbuf, 64, ACCLReduceFunctions.SUM, run_async=True)
        assert handle is not None
        assert handle.wait(timeout=30)
        assert handle.done() and handle.retcode == 0 and handle.duration_ns >= 0
        return rbuf.copy()

    for got in world.run(rank_fn):
        np.testing.assert_array_equal(got, sum(range(WORLD)))
    assert world.instances[0].nop() is None


def test_dropped_async_handles_keep_buffers_alive(world):
    def rank_fn(rank, inst):
        keep = inst.allocate((256,))
        for _ in range(3):
            sbuf, rbuf = inst.allocate((256,)), inst.allocate((256,))
            sbuf[:] = 1
            inst.allreduce(sbuf, rbuf, 256, ACCLReduceFunctions.SUM, run_async=True)
            del sbuf, rbuf  # the handle is dropped too: accl keeps the call's buffers
        inst.barrier()
        keep[:] = 5
        inst.allreduce(keep, keep, 256, ACCLReduceFunctions.SUM)
        return keep.copy()

    for got in world.run(rank_fn):
        np.testing.assert_array_equal(got, 5 * WORLD)


# --------------------------------------------------------------- sim_mode world discovery


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _free_consecutive_ports(n, attempts=200):
    """A base port such that base .. base+n-1 can all be bound right now (the
    legacy sim_sock form derives every rank's port from one base)."""
    for _ in range(attempts):
        base = _free_ports(1)[0]
        if block_is_free(base, n):
            return base
    pytest.skip(f"no {n} consecutive free ports found")


def _allreduce_world(instances):
    results = [None] * len(instances)

    def rank_fn(rank):
        sbuf, rbuf = instances[rank].allocate((8,), dtype=np.int32), instances[rank].allocate((8,), dtype=np.int32)
        sbuf[:] = rank + 1
        instances[rank].allreduce(sbuf, rbuf, 8, ACCLReduceFunctions.SUM)
        results[rank] = rbuf.copy()

    threads = [threading.Thread(target=rank_fn, args=(r,)) for r in range(len(instances))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def test_consecutive_sim_worlds_are_separate():
    first = [accl(2, i, sim_mode=True) for i in range(2)]
    second = [accl(2, i, sim_mode=True) for i in range(2)]
    assert {r["port"] for r in first[0].ranks}.isdisjoint({r["port"] for r in second[0].ranks})
    assert first[0].ranks == first[1].ranks
    for instances in (first, second):
        for got in _allreduce_world(instances):
            np.testing.assert_array_equal(got, 3)
    for inst in first + second:
        inst.deinit()


def test_explicit_ranks():
    ports = _free_ports(2)
    explicit = [accl(2, i, ranks=[("127.0.0.1", p) for p in ports], sim_mode=True) for i in range(2)]
    assert [r["port"] for r in explicit[1].ranks] == ports
    for got in _allreduce_world(explicit):
        np.testing.assert_array_equal(got, 3)
    for inst in explicit:
        inst.deinit()


def test_sim_sock_needs_a_running_session(monkeypatch):
    """sim_sock names this rank's instance of a public simulation session (tests/sim runs one);
    with nothing there the constructor fails at once, naming the address, instead of waiting."""
    base = _free_consecutive_ports(2)
    with pytest.raises(pyaccl.ACCLError, match=f"no simulator session at tcp://127.0.0.1:{base + 1}"):
        accl(2, 1, sim_mode=True, sim_sock=f"tcp://localhost:{base + 1}")
    with pytest.raises(pyaccl.ACCLArgumentError, match="sim_sock"):
        accl(2, 1, sim_mode=True, sim_sock="tcp://localhost:1")  # rank 0 would be port 0
    with pytest.raises(pyaccl.ACCLArgumentError, match="sim_sock"):
        accl(2, 0, sim_mode=True, sim_sock="localhost")
    # ACCL_DEVICE=sim: sim_mode without sim_sock opens the session of ACCL_SIM_ADDRESS (rank 0's port).
    monkeypatch.setenv("ACCL_DEVICE", "sim")
    monkeypatch.setenv("ACCL_SIM_ADDRESS", f"tcp://127.0.0.1:{base}")
    with pytest.raises(pyaccl.ACCLError, match=f"no simulator session at tcp://127.0.0.1:{base + 1}"):
        accl(2, 1, sim_mode=True)
    monkeypatch.delenv("ACCL_DEVICE")
    default = [accl(2, i, sim_mode=True) for i in range(2)]  # the bundled emulator again
    assert "emulator" in repr(default[0])
    for inst in default:
        inst.deinit()


def test_native_errors_map_to_python_classes():
    from pyaccl.errors import _from_native
    timeout = _from_native("timeout", "call 'bcast' on rank 2 did not complete", "bcast", 2, 0)
    assert isinstance(timeout, pyaccl.ACCLTimeoutError) and isinstance(timeout, TimeoutError)
    assert (timeout.call, timeout.rank) == ("bcast", 2)
    device = _from_native("device", "call 'recv' failed", "recv", 1, 0x800 | 0x20000000)
    assert isinstance(device, pyaccl.ACCLDeviceError)
    assert device.error_codes == [ErrorCode.RECEIVE_TIMEOUT_ERROR, ErrorCode.LINK_ERROR]
    assert type(_from_native("error", "no card", "xrt device", -1, 0)) is pyaccl.ACCLError

# SPDX-License-Identifier: Apache-2.0
"""The ACCL Python driver (seed 003 "ACCL"): class :class:`accl` and :class:`ACCLArithConfig`.

Each :class:`accl` instance drives one CCLO through libaccl (the C++ driver):
an emulated CCLO running in this process (``sim_mode=True``) or a CCLO on an
Alveo card (``xclbin=...``). Calls release the GIL while the device works, so
several instances can be driven from Python threads (seed 000).
"""

import numbers
import operator
import sys
import threading

import numpy as np

from . import _pyaccl, _sim
from .buffer import ACCLBuffer, native_type
from .constants import (GLOBAL_COMM, TAG_ANY, ACCLCompressionFlags, ACCLReduceFunctions, ACCLStreamFlags,
                        ErrorCode)
from .errors import ACCLArgumentError, ACCLDeviceError, ACCLError, ACCLTimeoutError

# The constants and errors are re-exported: scripts written for the 2022
# pyaccl import them from pyaccl.accl.
__all__ = [
    "accl", "ACCLArithConfig", "ACCLRequest", "ACCL_DEFAULT_ARITH_CONFIG", "ACCLBuffer",
    "ACCLReduceFunctions", "ACCLCompressionFlags", "ACCLStreamFlags", "ErrorCode", "TAG_ANY", "GLOBAL_COMM",
    "ACCLError", "ACCLDeviceError", "ACCLTimeoutError", "ACCLArgumentError",
]

# Rendezvous scratch buffers are capped like public ACCL's accl_network_utils
# (min(nbufs * bufsize, 4 MiB)): enough for its flat-tree reduce sizes
# without reserving large device memory per instance.
_MAX_RENDEZVOUS_CAP = 4 * 1024 * 1024
_PROTOCOLS = ("TCP", "UDP", "RDMA")


class ACCLArithConfig:
    """An arithmetic configuration for the ACCL hardware datapath.

    The datapath includes a variety of hardware functions for compression and
    reduction. Compression functions convert between compressed and
    uncompressed representations of data. Reduction functions apply
    arithmetic-logic functions to two buffers, producing a third. Each class
    of hardware function is identified by a unique ID.

    Args:
        uncompressed_elem_bytes (int): Number of bytes in the uncompressed datatype
        compressed_elem_bytes (int): Number of bytes in the compressed datatype
        elem_ratio_log (int): Log of number of uncompressed elements required to produce one
            compressed element
        compressor_tdest (int): Hardware function ID of compressor
        decompressor_tdest (int): Hardware function ID of decompressor
        arith_is_compressed (bool): Indicate whether any arithmetic is to be performed on compressed
            or uncompressed data.
        arith_tdest (list of int): List of hardware function IDs corresponding to the supported
            reduction operations (indexed by ACCLReduceFunctions)
    """

    def __init__(self, uncompressed_elem_bytes, compressed_elem_bytes, elem_ratio_log, compressor_tdest,
                 decompressor_tdest, arith_is_compressed, arith_tdest):
        self.uncompressed_elem_bytes = uncompressed_elem_bytes
        self.compressed_elem_bytes = compressed_elem_bytes
        self.elem_ratio_log = elem_ratio_log
        self.compressor_tdest = compressor_tdest
        self.decompressor_tdest = decompressor_tdest
        self.arith_is_compressed = arith_is_compressed
        self.arith_tdest = list(arith_tdest)

    def _to_native(self):
        cfg = _pyaccl.ArithConfig()
        cfg.uncompressed_elem_bytes = int(self.uncompressed_elem_bytes)
        cfg.compressed_elem_bytes = int(self.compressed_elem_bytes)
        cfg.elem_ratio_log = int(self.elem_ratio_log)
        cfg.compressor_tdest = int(self.compressor_tdest)
        cfg.decompressor_tdest = int(self.decompressor_tdest)
        cfg.arith_is_compressed = bool(self.arith_is_compressed)
        cfg.arith_tdest = [int(t) for t in self.arith_tdest]
        return cfg

    def __repr__(self):
        return (f"ACCLArithConfig({self.uncompressed_elem_bytes}, {self.compressed_elem_bytes}, "
                f"{self.elem_ratio_log}, {self.compressor_tdest}, {self.decompressor_tdest}, "
                f"{self.arith_is_compressed}, {self.arith_tdest})")


def _default_arith_config():
    """The driver's defaults, keyed by numpy type names as in seed 003."""
    table = {}
    for (uncompressed, compressed), cfg in _pyaccl.default_arith_config().items():
        table[(uncompressed.name, compressed.name)] = ACCLArithConfig(
            cfg.uncompressed_elem_bytes, cfg.compressed_elem_bytes, cfg.elem_ratio_log, cfg.compressor_tdest,
            cfg.decompressor_tdest, cfg.arith_is_compressed, cfg.arith_tdest)
    return table


#: (float16,float16) (float32,float16) (float32,float32) (float64,float64) (int32,int32) (int64,int64),
#: each with the function ids of SUM, MAX, MIN and PROD.
ACCL_DEFAULT_ARITH_CONFIG = _default_arith_config()


def _native_arith_config(arith_config):
    if not isinstance(arith_config, dict):
        raise ACCLArgumentError("accl: arith_config must be a dict {(dtype, dtype): ACCLArithConfig}")
    table = {}
    for key, cfg in arith_config.items():
        try:
            uncompressed, compressed = key
        except (TypeError, ValueError):
            raise ACCLArgumentError(f"accl: arith_config key {key!r} is not a pair of data types") from None
        table[(native_type(uncompressed, "arith_config"), native_type(compressed, "arith_config"))] = cfg._to_native()
    return table


def _whole(value, what, limit=0xFFFFFFFF):
    """An int in 0..limit. Integral floats are accepted: seed 002 passes counts like 1024/4."""
    if isinstance(value, bool):
        raise ACCLArgumentError(f"{what} must be a number, not {value!r}")
    if isinstance(value, numbers.Integral):
        number = int(value)
    elif isinstance(value, numbers.Real) and float(value).is_integer():
        number = int(value)
    else:
        raise ACCLArgumentError(f"{what} must be a whole number, not {value!r}")
    if not 0 <= number <= limit:
        raise ACCLArgumentError(f"{what} {number} is outside 0..{limit}")
    return number


def _index(value, what):
    """A rank, root, tag, communicator or function id: a non-negative integer."""
    try:
        number = operator.index(value)
    except TypeError:
        raise ACCLArgumentError(f"{what} must be an integer, not {value!r}") from None
    if not 0 <= number <= 0xFFFFFFFF:
        raise ACCLArgumentError(f"{what} {number} is outside 0..2^32-1")
    return number


def _parse_endpoint(text, what):
    """'tcp://host:port' or 'host:port' -> (ipv4, port)."""
    address = str(text)
    if "://" in address:
        address = address.split("://", 1)[1]
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ACCLArgumentError(f"accl: {what} {text!r} is not host:port")
    return _ipv4(host), int(port)


def _ipv4(host):
    # The driver takes dotted quads only; localhost is what old scripts use.
    return "127.0.0.1" if host in ("localhost", "") else host


def _rank_record(entry, index):
    """One rank of a user rank list: a dict (2022 pyaccl), an (ip, port[, session[, max_seg]]) tuple or 'ip:port'."""
    if isinstance(entry, dict):
        ip = entry.get("ip", "127.0.0.1")
        port = entry.get("port", 0)
        session = entry.get("session_id", entry.get("session", index))
        max_segment = entry.get("max_segment_size", 0)
    elif isinstance(entry, str):
        ip, port = _parse_endpoint(entry, f"ranks[{index}]")
        session, max_segment = index, 0
    else:
        try:
            fields = tuple(entry)
        except TypeError:
            raise ACCLArgumentError(f"accl: ranks[{index}] = {entry!r} is not a rank description") from None
        if not 2 <= len(fields) <= 4:
            raise ACCLArgumentError(f"accl: ranks[{index}] needs (ip, port[, session_id[, max_segment_size]])")
        ip, port = fields[0], fields[1]
        session = fields[2] if len(fields) > 2 else index
        max_segment = fields[3] if len(fields) > 3 else 0
    session = -1 if session is None else int(session)
    return {"ip": _ipv4(str(ip)), "port": _index(port, f"ranks[{index}] port"),
            "session_id": session, "max_segment_size": _whole(max_segment, f"ranks[{index}] max_segment_size",
                                                              limit=2**64 - 1)}


class ACCLRequest:
    """Handle to a call started with ``run_async=True``.

    ``wait()`` blocks until the call completes (bounded by the device
    timeout), copies results to host memory unless ``to_fpga`` was given and
    raises the call's error. The handle keeps the call's buffers alive.
    """

    def __init__(self, native, buffers):
        self._native = native
        self._buffers = buffers  # keeps device memory alive while the CCLO uses it

    def wait(self, timeout=None):
        """Waits for completion; with ``timeout`` (seconds) returns False if still running."""
        if timeout is None:
            self._native.wait()
            return True
        return self._native.wait_for(max(0, int(timeout * 1000)))

    def test(self):
        """True once the call completed (raises its error if it failed)."""
        return self._native.test()

    def done(self):
        """True once the call completed or failed; never raises."""
        return self._native.done()

    @property
    def duration_ns(self):
        """Device-measured execution time of the completed call, in nanoseconds."""
        return self._native.duration_ns

    @property
    def retcode(self):
        """RETCODE bits of the completed call (0: success)."""
        return self._native.retcode

    def __repr__(self):
        return f"<ACCLRequest {self._native.call_name} done={self.done()}>"


class _SubmoduleAccess(type):
    """Lets the class stand in for its module.

    Seed 000 does ``from pyaccl import accl`` and calls it, so the package
    attribute ``pyaccl.accl`` is this class; seed 003 spells the same things
    ``pyaccl.accl.accl`` and ``pyaccl.accl.ACCLArithConfig``. Names the class
    lacks are looked up in this module, so both spellings work.
    """

    def __getattr__(cls, name):
        module = sys.modules[__name__]
        if name.startswith("__") or name not in module.__dict__:
            raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")
        return module.__dict__[name]


class accl(metaclass=_SubmoduleAccess):  # noqa: N801 (seed 003 name)
    """ACCL Python Driver.

    Args:
        nranks (int): Number of ranks (ACCL instances) in the global communicator.
        local_rank (int): This instance's rank.
        ranks (list, optional): One entry per rank: a dict with ``ip``, ``port`` and optionally
            ``session_id`` and ``max_segment_size`` (bytes; 0 = bufsize), an ``(ip, port)`` tuple
            or ``"ip:port"``. In sim_mode this instance's emulated CCLO listens on its own entry.
            Defaults: sim_mode without sim_sock: the emulated CCLOs of this process's
            instances with the same nranks; sim_sock: its host with consecutive ports;
            hardware: 127.0.0.1 port 9000 + i.
        protocol (str, optional): "TCP", "UDP" or "RDMA": the network stack of the xclbin.
            The emulator picks its transport itself (ACCL_EMU_TRANSPORT).
        nbufs (int, optional): Number of RX (eager) buffers. Defaults to 16.
        bufsize (int, optional): Bytes per RX buffer; also the largest message sent eagerly.
            Defaults to 1024.
        arith_config (dict, optional): {(uncompressed dtype, compressed dtype): ACCLArithConfig}.
        sim_mode (bool, optional): Run on the bundled emulator, in this process. Defaults to False.
        xclbin (str, optional): Bitstream for hardware mode (XRT backend).
        sim_sock (str, optional): ``"tcp://host:port"`` where this rank's emulated CCLO listens
            (2022 convention: port = base + local_rank; rank i is then at base + i).
        board_idx (int, optional): Alveo card index in hardware mode (default: ACCL_DEVICE_INDEX,
            else the card nearest to this process).
        cclo_idx (int, optional): Which CCLO of the xclbin (kernel instance ccl_offload_<i>).
            Defaults to 0.
    """

    def __init__(self, nranks, local_rank, ranks=None, protocol=None, nbufs=16, bufsize=1024,
                 arith_config=ACCL_DEFAULT_ARITH_CONFIG, sim_mode=False, xclbin=None, sim_sock=None,
                 board_idx=None, cclo_idx=0):
        self._driver = None  # first, so deinit()/__del__ work after a failed constructor
        self._pending_lock = threading.Lock()
        self._pending = []  # handles of async calls not known to be complete
        self.nranks = _index(nranks, "accl: nranks")
        if self.nranks < 1:
            raise ACCLArgumentError("accl: nranks must be at least 1")
        self.local_rank = _index(local_rank, "accl: local_rank")
        if self.local_rank >= self.nranks:
            raise ACCLArgumentError(f"accl: local_rank {self.local_rank} is outside the {self.nranks} ranks")
        if protocol is not None and str(protocol).upper() not in _PROTOCOLS:
            raise ACCLArgumentError(f"accl: protocol {protocol!r} is not one of {', '.join(_PROTOCOLS)}")
        self.protocol = None if protocol is None else str(protocol).upper()
        self.nbufs = _index(nbufs, "accl: nbufs")
        self.bufsize = _whole(bufsize, "accl: bufsize")
        if self.nbufs < 1 or self.bufsize < 1:
            raise ACCLArgumentError("accl: nbufs and bufsize must be at least 1")
        self.arith_config = arith_config
        self.sim_mode = bool(sim_mode)
        self.xclbin = xclbin
        self.sim_sock = sim_sock
        self.board_idx = board_idx
        self.cclo_idx = _index(cclo_idx, "accl: cclo_idx")
        native_arith = _native_arith_config(arith_config)
        if ranks is not None:
            ranks = [_rank_record(entry, i) for i, entry in enumerate(ranks)]
            if len(ranks) != self.nranks:
                raise ACCLArgumentError(f"accl: {len(ranks)} ranks given for nranks={self.nranks}")

        if self.sim_mode:
            driver, ranks = self._open_emulator(ranks, native_arith)
        elif xclbin is not None:
            if not _pyaccl.have_hardware_backend():
                raise ACCLError("accl: pyaccl was built without the hardware backend (libaccl_hw); "
                                "use sim_mode=True for the emulator", "accl", self.local_rank)
            board = "" if board_idx is None else str(board_idx)
            try:
                driver = _pyaccl.create_hardware(str(xclbin), board, self.cclo_idx, native_arith)
            except ACCLError as e:
                # Name what this constructor tried to open, not just the backend's view.
                raise ACCLError(f"accl: cannot open CCLO {self.cclo_idx} of {xclbin}: {e}", "accl",
                                self.local_rank) from e
            if ranks is None:
                ranks = [{"ip": "127.0.0.1", "port": 9000 + i, "session_id": i, "max_segment_size": 0}
                         for i in range(self.nranks)]
        else:
            raise ACCLArgumentError("accl: no device: pass xclbin=... for an Alveo card or sim_mode=True "
                                    "for the bundled emulator")
        self.ranks = ranks
        max_rendezvous = min(self.nbufs * self.bufsize, _MAX_RENDEZVOUS_CAP)
        driver.initialize([(r["ip"], r["port"], r["session_id"], r["max_segment_size"]) for r in ranks],
                          self.local_rank, self.nbufs, self.bufsize, self.bufsize, max_rendezvous)
        self._driver = driver

    def _open_emulator(self, ranks, native_arith):
        """This rank's emulated CCLO and the rank list of its world."""
        if ranks is not None:
            me = ranks[self.local_rank]
            if self.sim_sock is not None:
                ip, port = _parse_endpoint(self.sim_sock, "sim_sock")
            else:
                ip, port = me["ip"], me["port"]
            return _pyaccl.create_emulated(ip, port, native_arith), ranks
        if self.sim_sock is not None:
            ip, port = _parse_endpoint(self.sim_sock, "sim_sock")
            base = port - self.local_rank
            if base < 1 or base + self.nranks - 1 > 0xFFFF:
                raise ACCLArgumentError(f"accl: sim_sock port {port} leaves no port range for {self.nranks} ranks")
            ranks = [{"ip": ip, "port": base + i, "session_id": i, "max_segment_size": 0}
                     for i in range(self.nranks)]
            return _pyaccl.create_emulated(ip, port, native_arith), ranks
        driver, endpoints = _sim.claim_emulated_rank(self.nranks, self.local_rank, native_arith)
        ranks = [{"ip": ip, "port": port, "session_id": i, "max_segment_size": 0}
                 for i, (ip, port) in enumerate(endpoints)]
        return driver, ranks

    def __repr__(self):
        device = "emulator" if self.sim_mode else f"xclbin {self.xclbin}"
        return f"<pyaccl.accl rank {self.local_rank} of {self.nranks} on {device}>"

    # ------------------------------------------------------------------ helpers

    def _live_driver(self, what):
        if self._driver is None:
            raise ACCLArgumentError(f"{what}: this accl instance has no device (its constructor failed)")
        return self._driver

    def _buffer(self, buf, what):
        if not isinstance(buf, ACCLBuffer):
            raise ACCLArgumentError(f"{what}: expected an ACCLBuffer from accl.allocate(), got {type(buf).__name__}")
        return buf._native_view(what)

    @staticmethod
    def _compress(compress_dtype, what):
        return _pyaccl.DataType.none if compress_dtype is None else native_type(compress_dtype, what)

    def _finish(self, request, run_async, buffers):
        """Sync calls already waited and raised; async calls get a handle."""
        if not run_async:
            return None
        handle = ACCLRequest(request, buffers)
        with self._pending_lock:
            # Handles the user dropped stay here until their call completes,
            # so the CCLO never works on freed buffers.
            self._pending = [h for h in self._pending if not h.done()]
            self._pending.append(handle)
        return handle

    # ------------------------------------------------------------ buffers

    def allocate(self, shape, dtype=np.float32, physical_address=None, prealloc=True, host_only=False):
        """Allocates an ACCLBuffer in the device memory associated with this CCLO instance.

        Args:
            shape (tuple): The shape of the desired buffer.
            dtype (NumPy datatype, optional): Desired data type. Defaults to np.float32.
            physical_address (int, optional): Physical address override. Not supported (the
                driver places buffers); must be None.
            prealloc (bool, optional): Populate the device-side memory immediately upon buffer
                creation. Accepted; memory is always reserved at creation.
            host_only (bool, optional): Extension: host memory the CCLO accesses directly.

        Returns:
            ACCLBuffer: Handle to the created ACCL buffer.
        """
        self._live_driver("allocate")
        return ACCLBuffer(shape, dtype=dtype, target=self, physical_address=physical_address, prealloc=prealloc,
                          host_only=host_only)

    # ------------------------------------------------------------ primitives

    def nop(self, run_async=False):
        """Calls the accelerator with no work. Useful for measuring call latency.

        Args:
            run_async (bool, optional): Whether to execute asynchronously. Defaults to False.

        Returns:
            handle to call: When run_async is True, returns a handle which can be waited on.
            Otherwise, returns None.
        """
        driver = self._live_driver("nop")
        return self._finish(driver.nop(bool(run_async)), run_async, ())

    def copy(self, srcbuf, dstbuf, count, from_fpga=False, to_fpga=False, run_async=False):
        """Copy data between two buffers.

        Args:
            srcbuf (ACCLBuffer): Buffer from which to send data
            dstbuf (ACCLBuffer): Buffer into which to receive data
            count (int): Number of elements to copy
            from_fpga (bool, optional): Send without syncing srcbuf first, assuming the data is
                already in FPGA memory. Defaults to False.
            to_fpga (bool, optional): Return without syncing dstbuf first, assuming the data is
                not required in host memory. Defaults to False.
            run_async (bool, optional): Return handle to call instead of waiting for completion.

        Returns:
            handle to call when run_async is True, else None.
        """
        driver = self._live_driver("copy")
        src, dst = self._buffer(srcbuf, "copy srcbuf"), self._buffer(dstbuf, "copy dstbuf")
        request = driver.copy(src, dst, _whole(count, "copy: count"), bool(from_fpga), bool(to_fpga),
                              bool(run_async))
        return self._finish(request, run_async, (srcbuf, dstbuf))

    def combine(self, count, func, val1, val2, result, val1_from_fpga=False, val2_from_fpga=False, to_fpga=False,
                run_async=False):
        """Combine data from two buffers and put result in a third buffer.

        Args:
            count (int): Number of elements to combine
            func (int): Index of function to be applied from ACCLReduceFunctions
            val1, val2 (ACCLBuffers): Operand buffers
            result (ACCLBuffer): Result buffer
            val1_from_fpga, val2_from_fpga (bool, optional): Combine without syncing operand
                buffers first, assuming the data is already in FPGA memory. Defaults to False.
            to_fpga (bool, optional): Return without syncing result first. Defaults to False.
            run_async (bool, optional): Return handle to call instead of waiting for completion.
        """
        driver = self._live_driver("combine")
        a, b = self._buffer(val1, "combine val1"), self._buffer(val2, "combine val2")
        res = self._buffer(result, "combine result")
        request = driver.combine(_whole(count, "combine: count"), _index(func, "combine: func"), a, b, res,
                                 bool(val1_from_fpga), bool(val2_from_fpga), bool(to_fpga), bool(run_async))
        return self._finish(request, run_async, (val1, val2, result))

    def send(self, srcbuf, count, dst, tag=TAG_ANY, comm_id=GLOBAL_COMM, from_fpga=False, compress_dtype=None,
             stream_flags=ACCLStreamFlags.NO_STREAM, run_async=False):
        """Send data to a remote ACCL instance.

        Args:
            srcbuf (ACCLBuffer): Buffer from which to send data (with OP0_STREAM only its dtype
                is used: the data comes from the local kernel stream)
            count (int): Number of elements to send
            dst (int): Rank index of destination, in the selected communicator
            tag (int, optional): Optional tag. Defaults to TAG_ANY. With RES_STREAM: the
                destination's stream id.
            comm_id (int, optional): Index in the internal communicator list. Defaults to 0
                which is the global communicator.
            from_fpga (bool, optional): Send without syncing srcbuf first. Defaults to False.
            compress_dtype (NumPy datatype, optional): A NumPy datatype to which the CCLO will
                compress the data before sending on the wire. Defaults to None.
            stream_flags (int, optional): ACCLStreamFlags: NO_STREAM (memory to memory),
                OP0_STREAM (send from the local kernel stream), RES_STREAM (deliver to the remote
                kernel stream ``tag``). Defaults to NO_STREAM.
            run_async (bool, optional): Return handle to call instead of waiting for completion.
        """
        driver = self._live_driver("send")
        count = _whole(count, "send: count")
        dst = _index(dst, "send: dst")
        tag = _index(tag, "send: tag")
        comm_id = _index(comm_id, "send: comm_id")
        compress = self._compress(compress_dtype, "send: compress_dtype")
        flags = _index(stream_flags, "send: stream_flags")
        if flags == ACCLStreamFlags.NO_STREAM:
            request = driver.send(self._buffer(srcbuf, "send srcbuf"), count, dst, tag, comm_id, bool(from_fpga),
                                  compress, bool(run_async))
        elif flags == ACCLStreamFlags.OP0_STREAM:
            src_type = native_type(srcbuf.dtype if hasattr(srcbuf, "dtype") else srcbuf, "send srcbuf")
            request = driver.send_from_stream(src_type, count, dst, tag, comm_id, compress, bool(run_async))
        elif flags == ACCLStreamFlags.RES_STREAM:
            request = driver.stream_put(self._buffer(srcbuf, "send srcbuf"), count, dst, tag, comm_id,
                                        bool(from_fpga), compress, bool(run_async))
        else:
            raise ACCLArgumentError(f"send: stream_flags {stream_flags!r} is not supported "
                                    "(NO_STREAM, OP0_STREAM or RES_STREAM)")
        return self._finish(request, run_async, (srcbuf,))

    def recv(self, dstbuf, count, src, tag=TAG_ANY, comm_id=GLOBAL_COMM, to_fpga=False, compress_dtype=None,
             run_async=False):
        """Receive data from a remote ACCL instance.

        Args:
            dstbuf (ACCLBuffer): Buffer into which to receive data
            count (int): Number of elements to receive
            src (int): Rank index of source, in the selected communicator
            tag (int, optional): Optional tag. Defaults to TAG_ANY.
            comm_id (int, optional): Index in the internal communicator list. Defaults to 0.
            to_fpga (bool, optional): Return without syncing dstbuf first. Defaults to False.
            compress_dtype (NumPy datatype, optional): Wire data type used by the sender.
            run_async (bool, optional): Return handle to call instead of waiting for completion.
        """
        driver = self._live_driver("recv")
        request = driver.recv(self._buffer(dstbuf, "recv dstbuf"), _whole(count, "recv: count"),
                              _index(src, "recv: src"), _index(tag, "recv: tag"), _index(comm_id, "recv: comm_id"),
                              bool(to_fpga), self._compress(compress_dtype, "recv: compress_dtype"), bool(run_async))
        return self._finish(request, run_async, (dstbuf,))

    # ------------------------------------------------------------ collectives

    def bcast(self, buf, count, root, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False, compress_dtype=None,
              run_async=False):
        """Broadcast data to all ACCL instances in a communicator.

        Args:
            buf (ACCLBuffer): Buffer from which to send data, or into which to receive.
            count (int): Number of elements to broadcast
            root (int): Index of the root, i.e. the ACCL instance which sends from buf. All
                others receive into buf.
            comm_id, from_fpga, to_fpga, compress_dtype, run_async: as for allgather.
        """
        driver = self._live_driver("bcast")
        request = driver.bcast(self._buffer(buf, "bcast buf"), _whole(count, "bcast: count"),
                               _index(root, "bcast: root"), _index(comm_id, "bcast: comm_id"), bool(from_fpga),
                               bool(to_fpga), self._compress(compress_dtype, "bcast: compress_dtype"),
                               bool(run_async))
        return self._finish(request, run_async, (buf,))

    def scatter(self, sbuf, rbuf, count, root, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False,
                compress_dtype=None, run_async=False):
        """Scatter data to all ACCL instances in a communicator.

        Args:
            sbuf (ACCLBuffer): Buffer from which to send data (root: count elements per rank)
            rbuf (ACCLBuffer): Buffer into which to receive data (count elements)
            count (int): Number of elements each rank receives
            root (int): Index of the root, i.e. the ACCL instance which sends from sbuf.
            comm_id, from_fpga, to_fpga, compress_dtype, run_async: as for allgather.
        """
        driver = self._live_driver("scatter")
        request = driver.scatter(self._buffer(sbuf, "scatter sbuf"), self._buffer(rbuf, "scatter rbuf"),
                                 _whole(count, "scatter: count"), _index(root, "scatter: root"),
                                 _index(comm_id, "scatter: comm_id"), bool(from_fpga), bool(to_fpga),
                                 self._compress(compress_dtype, "scatter: compress_dtype"), bool(run_async))
        return self._finish(request, run_async, (sbuf, rbuf))

    def gather(self, sbuf, rbuf, count, root, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False,
               compress_dtype=None, run_async=False):
        """Gathers data from all ACCL instances in a communicator.

        Args:
            sbuf (ACCLBuffer): Buffer from which to send data (count elements)
            rbuf (ACCLBuffer): Buffer into which to receive data (root: count elements per rank)
            count (int): Number of elements each rank sends
            root (int): Index of the root, i.e. the ACCL instance which receives into rbuf.
            comm_id, from_fpga, to_fpga, compress_dtype, run_async: as for allgather.
        """
        driver = self._live_driver("gather")
        request = driver.gather(self._buffer(sbuf, "gather sbuf"), self._buffer(rbuf, "gather rbuf"),
                                _whole(count, "gather: count"), _index(root, "gather: root"),
                                _index(comm_id, "gather: comm_id"), bool(from_fpga), bool(to_fpga),
                                self._compress(compress_dtype, "gather: compress_dtype"), bool(run_async))
        return self._finish(request, run_async, (sbuf, rbuf))

    def allgather(self, sbuf, rbuf, count, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False,
                  compress_dtype=None, run_async=False):
        """Fused gather-bcast.

        Args:
            sbuf (ACCLBuffer): Buffer from which to send data (count elements)
            rbuf (ACCLBuffer): Buffer into which to receive data (count elements per rank)
            count (int): Number of elements each rank contributes
            comm_id (int, optional): Index in the internal communicator list. Defaults to 0
                which is the global communicator.
            from_fpga (bool, optional): Send without syncing sbuf first, assuming the data is
                already in FPGA memory. Defaults to False.
            to_fpga (bool, optional): Return without syncing rbuf first, assuming the data is not
                required in host memory. Defaults to False.
            compress_dtype (NumPy datatype, optional): A NumPy datatype to which the CCLO will
                compress the data before sending on the wire. Defaults to None.
            run_async (bool, optional): Return handle to call instead of waiting for completion.
                Defaults to False.

        Returns:
            handle to call: When run_async is True, returns a handle which can be waited on.
            Otherwise, returns None.
        """
        driver = self._live_driver("allgather")
        request = driver.allgather(self._buffer(sbuf, "allgather sbuf"), self._buffer(rbuf, "allgather rbuf"),
                                   _whole(count, "allgather: count"), _index(comm_id, "allgather: comm_id"),
                                   bool(from_fpga), bool(to_fpga),
                                   self._compress(compress_dtype, "allgather: compress_dtype"), bool(run_async))
        return self._finish(request, run_async, (sbuf, rbuf))

    def reduce(self, sbuf, rbuf, count, root, func, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False,
               compress_dtype=None, run_async=False):
        """Combine data from multiple ACCL instances, using a reduction function.

        Args:
            sbuf (ACCLBuffer): Buffer from which to send data
            rbuf (ACCLBuffer): Buffer into which to receive data (root only)
            count (int): Number of elements to reduce
            root (int): Index of the root, i.e. the ACCL instance which writes to rbuf.
            func (int): Index of function to be applied from ACCLReduceFunctions
            comm_id, from_fpga, to_fpga, compress_dtype, run_async: as for allgather.
        """
        driver = self._live_driver("reduce")
        request = driver.reduce(self._buffer(sbuf, "reduce sbuf"), self._buffer(rbuf, "reduce rbuf"),
                                _whole(count, "reduce: count"), _index(root, "reduce: root"),
                                _index(func, "reduce: func"), _index(comm_id, "reduce: comm_id"), bool(from_fpga),
                                bool(to_fpga), self._compress(compress_dtype, "reduce: compress_dtype"),
                                bool(run_async))
        return self._finish(request, run_async, (sbuf, rbuf))

    def allreduce(self, sbuf, rbuf, count, func, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False,
                  compress_dtype=None, run_async=False):
        """Fused reduce-bcast.

        Args:
            sbuf (ACCLBuffer): Buffer from which to send data
            rbuf (ACCLBuffer): Buffer into which to receive data
            count (int): Number of elements to reduce
            func (int): Index of function to be applied from ACCLReduceFunctions
            comm_id, from_fpga, to_fpga, compress_dtype, run_async: as for allgather.
        """
        driver = self._live_driver("allreduce")
        request = driver.allreduce(self._buffer(sbuf, "allreduce sbuf"), self._buffer(rbuf, "allreduce rbuf"),
                                   _whole(count, "allreduce: count"), _index(func, "allreduce: func"),
                                   _index(comm_id, "allreduce: comm_id"), bool(from_fpga), bool(to_fpga),
                                   self._compress(compress_dtype, "allreduce: compress_dtype"), bool(run_async))
        return self._finish(request, run_async, (sbuf, rbuf))

    def reduce_scatter(self, sbuf, rbuf, count, func, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False,
                       compress_dtype=None, run_async=False):
        """Fused reduce-scatter.

        Args:
            sbuf (ACCLBuffer): Buffer from which to send data (count elements per rank)
            rbuf (ACCLBuffer): Buffer into which to receive data (count elements)
            count (int): Number of elements each rank receives
            func (int): Index of function to be applied from ACCLReduceFunctions
            comm_id, from_fpga, to_fpga, compress_dtype, run_async: as for allgather.
        """
        driver = self._live_driver("reduce_scatter")
        request = driver.reduce_scatter(self._buffer(sbuf, "reduce_scatter sbuf"),
                                        self._buffer(rbuf, "reduce_scatter rbuf"),
                                        _whole(count, "reduce_scatter: count"), _index(func, "reduce_scatter: func"),
                                        _index(comm_id, "reduce_scatter: comm_id"), bool(from_fpga), bool(to_fpga),
                                        self._compress(compress_dtype, "reduce_scatter: compress_dtype"),
                                        bool(run_async))
        return self._finish(request, run_async, (sbuf, rbuf))

    def alltoall(self, sbuf, rbuf, count, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False,
                 compress_dtype=None, run_async=False):
        """Extension: all-to-all exchange of ``count`` elements per pair of ranks.

        Args:
            sbuf (ACCLBuffer): count elements for each rank, in rank order
            rbuf (ACCLBuffer): receives count elements from each rank, in rank order
            comm_id, from_fpga, to_fpga, compress_dtype, run_async: as for allgather.
        """
        driver = self._live_driver("alltoall")
        request = driver.alltoall(self._buffer(sbuf, "alltoall sbuf"), self._buffer(rbuf, "alltoall rbuf"),
                                  _whole(count, "alltoall: count"), _index(comm_id, "alltoall: comm_id"),
                                  bool(from_fpga), bool(to_fpga),
                                  self._compress(compress_dtype, "alltoall: compress_dtype"), bool(run_async))
        return self._finish(request, run_async, (sbuf, rbuf))

    def barrier(self, comm_id=GLOBAL_COMM):
        """Blocks until every rank of the communicator has entered the barrier."""
        driver = self._live_driver("barrier")
        driver.barrier(_index(comm_id, "barrier: comm_id"), False)

    # ------------------------------------------------------------ communicators

    def split_communicator(self, indices):
        """Creates a new communicator from the global communicator by filtering it with a list of indices.

        Every rank named in ``indices`` must call this, in the same order relative to its other
        split_communicator calls. New rank i is global rank ``indices[i]``; this rank must be one
        of them.

        Args:
            indices (list of int): List of rank indices to include in the new communicator

        Returns:
            int: the new communicator's comm_id for the calls' ``comm_id`` argument.
        """
        driver = self._live_driver("split_communicator")
        return driver.split_communicator([_index(i, "split_communicator: index") for i in indices])

    def free_communicator(self, comm_id):
        """Extension: releases a communicator created by split_communicator (its id is not reused)."""
        self._live_driver("free_communicator").free_communicator(_index(comm_id, "free_communicator: comm_id"))

    def get_comm_rank(self, comm_id=GLOBAL_COMM):
        """This instance's rank in communicator ``comm_id``."""
        return self._live_driver("get_comm_rank").get_comm_rank(_index(comm_id, "get_comm_rank: comm_id"))

    def get_comm_size(self, comm_id=GLOBAL_COMM):
        """Number of ranks of communicator ``comm_id``."""
        return self._live_driver("get_comm_size").get_comm_size(_index(comm_id, "get_comm_size: comm_id"))

    # ------------------------------------------------------------ configuration and debug

    def set_timeout(self, seconds):
        """Device timeout of every call, in seconds (default ACCL_TIMEOUT_MS)."""
        self._live_driver("set_timeout").set_timeout_us(int(seconds * 1_000_000))

    def supports(self, func):
        """Whether the CCLO implements reduce function ``func`` (ACCLReduceFunctions)."""
        return self._live_driver("supports").supports(_index(func, "supports: func"))

    def dump_exchange_memory(self):
        """The CCLO's configuration memory, decoded, as text."""
        return self._live_driver("dump_exchange_memory").dump_exchange_memory()

    def dump_rx_buffers(self):
        """The RX buffer table, decoded, as text."""
        return self._live_driver("dump_rx_buffers").dump_rx_buffers()

    def dump_communicator(self, comm_id=GLOBAL_COMM):
        """Communicator ``comm_id`` as stored in the CCLO, as text."""
        return self._live_driver("dump_communicator").dump_communicator(_index(comm_id, "dump_communicator"))

    def deinit(self):
        """De-initializes an ACCL instance, resetting the CCLO kernel and deallocating all
        internal buffers, but not buffers created by users with allocate()."""
        if self._driver is None:
            return
        self._driver.deinit()
        with self._pending_lock:
            self._pending = []

# SPDX-License-Identifier: Apache-2.0
"""The calls of an :class:`~pyaccl.accl.accl` instance (primitives, point-to-point, collectives) and
:class:`ACCLRequest`, the handle of a call started with ``run_async=True``."""

from . import _pyaccl
from ._checks import _index, _whole
from .buffer import ACCLBuffer, native_type
from .constants import GLOBAL_COMM, TAG_ANY, ACCLStreamFlags
from .errors import ACCLArgumentError


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


class _DeviceCalls:
    """What an accl instance asks its CCLO to do, call by call. Mixed into :class:`~pyaccl.accl.accl`, whose
    constructor sets ``_driver`` (None until a device is open), ``_pending`` and ``_pending_lock``."""

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

    @staticmethod
    def _waitfor(waitfor, what):
        """The native requests of ``waitfor``: handles this instance returned with run_async=True.

        Every device pyaccl opens chains: the bundled emulator holds a call in its call controller
        until its dependencies complete (device-side); a card and a simulator session have one
        dispatcher per CCLO that starts a call only after them (host-side, as public ACCL's firmware
        has no chaining). Handles of another instance are refused by the driver
        (ACCLArgumentError naming the call).
        """
        if waitfor is None:
            return []
        if isinstance(waitfor, ACCLRequest) or not hasattr(waitfor, "__iter__"):
            raise ACCLArgumentError(f"{what}: waitfor must be a list of handles (waitfor=[handle]), "
                                    f"not {type(waitfor).__name__}")
        natives = []
        for i, handle in enumerate(waitfor):
            if not isinstance(handle, ACCLRequest):
                raise ACCLArgumentError(f"{what}: waitfor[{i}] is {type(handle).__name__}, not a handle "
                                        "returned by a call with run_async=True")
            natives.append(handle._native)
        return natives

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

    # ------------------------------------------------------------ primitives

    def nop(self, run_async=False, waitfor=None):
        """Calls the accelerator with no work. Useful for measuring call latency.

        Args:
            run_async (bool, optional): Whether to execute asynchronously. Defaults to False.
            waitfor (list of handles, optional): Calls (handles returned with run_async=True by
                this instance) that must complete before this one starts. Defaults to none.

        Returns:
            handle to call: When run_async is True, returns a handle which can be waited on.
            Otherwise, returns None.
        """
        driver = self._live_driver("nop")
        deps = self._waitfor(waitfor, "nop")
        return self._finish(driver.nop(bool(run_async), deps), run_async, ())

    def copy(self, srcbuf, dstbuf, count, from_fpga=False, to_fpga=False, run_async=False, waitfor=None):
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
            waitfor (list of handles, optional): Calls (handles returned with run_async=True by
                this instance) that must complete before this one starts. Defaults to none.

        Returns:
            handle to call when run_async is True, else None.
        """
        driver = self._live_driver("copy")
        deps = self._waitfor(waitfor, "copy")
        src, dst = self._buffer(srcbuf, "copy srcbuf"), self._buffer(dstbuf, "copy dstbuf")
        request = driver.copy(src, dst, _whole(count, "copy: count"), bool(from_fpga), bool(to_fpga),
                              bool(run_async), deps)
        return self._finish(request, run_async, (srcbuf, dstbuf))

    def combine(self, count, func, val1, val2, result, val1_from_fpga=False, val2_from_fpga=False, to_fpga=False,
                run_async=False, waitfor=None):
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
            waitfor (list of handles, optional): Calls (handles returned with run_async=True by
                this instance) that must complete before this one starts. Defaults to none.
        """
        driver = self._live_driver("combine")
        deps = self._waitfor(waitfor, "combine")
        a, b = self._buffer(val1, "combine val1"), self._buffer(val2, "combine val2")
        res = self._buffer(result, "combine result")
        request = driver.combine(_whole(count, "combine: count"), _index(func, "combine: func"), a, b, res,
                                 bool(val1_from_fpga), bool(val2_from_fpga), bool(to_fpga), bool(run_async), deps)
        return self._finish(request, run_async, (val1, val2, result))

    def send(self, srcbuf, count, dst, tag=TAG_ANY, comm_id=GLOBAL_COMM, from_fpga=False, compress_dtype=None,
             stream_flags=ACCLStreamFlags.NO_STREAM, run_async=False, waitfor=None):
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
            waitfor (list of handles, optional): Calls (handles returned with run_async=True by
                this instance) that must complete before this one starts. Defaults to none.
        """
        driver = self._live_driver("send")
        deps = self._waitfor(waitfor, "send")
        count = _whole(count, "send: count")
        dst = _index(dst, "send: dst")
        tag = _index(tag, "send: tag")
        comm_id = _index(comm_id, "send: comm_id")
        compress = self._compress(compress_dtype, "send: compress_dtype")
        flags = _index(stream_flags, "send: stream_flags")
        if flags == ACCLStreamFlags.NO_STREAM:
            request = driver.send(self._buffer(srcbuf, "send srcbuf"), count, dst, tag, comm_id, bool(from_fpga),
                                  compress, bool(run_async), deps)
        elif flags == ACCLStreamFlags.OP0_STREAM:
            src_type = native_type(srcbuf.dtype if hasattr(srcbuf, "dtype") else srcbuf, "send srcbuf")
            request = driver.send_from_stream(src_type, count, dst, tag, comm_id, compress, bool(run_async), deps)
        elif flags == ACCLStreamFlags.RES_STREAM:
            request = driver.stream_put(self._buffer(srcbuf, "send srcbuf"), count, dst, tag, comm_id,
                                        bool(from_fpga), compress, bool(run_async), deps)
        else:
            raise ACCLArgumentError(f"send: stream_flags {stream_flags!r} is not supported "
                                    "(NO_STREAM, OP0_STREAM or RES_STREAM)")
        return self._finish(request, run_async, (srcbuf,))

    def recv(self, dstbuf, count, src, tag=TAG_ANY, comm_id=GLOBAL_COMM, to_fpga=False, compress_dtype=None,
             run_async=False, waitfor=None):
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
            waitfor (list of handles, optional): Calls (handles returned with run_async=True by
                this instance) that must complete before this one starts. Defaults to none.
        """
        driver = self._live_driver("recv")
        deps = self._waitfor(waitfor, "recv")
        request = driver.recv(self._buffer(dstbuf, "recv dstbuf"), _whole(count, "recv: count"),
                              _index(src, "recv: src"), _index(tag, "recv: tag"), _index(comm_id, "recv: comm_id"),
                              bool(to_fpga), self._compress(compress_dtype, "recv: compress_dtype"), bool(run_async),
                              deps)
        return self._finish(request, run_async, (dstbuf,))

    # ------------------------------------------------------------ collectives

    def bcast(self, buf, count, root, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False, compress_dtype=None,
              run_async=False, waitfor=None):
        """Broadcast data to all ACCL instances in a communicator.

        Args:
            buf (ACCLBuffer): Buffer from which to send data, or into which to receive.
            count (int): Number of elements to broadcast
            root (int): Index of the root, i.e. the ACCL instance which sends from buf. All
                others receive into buf.
            comm_id, from_fpga, to_fpga, compress_dtype, run_async, waitfor: as for
                allgather.
        """
        driver = self._live_driver("bcast")
        deps = self._waitfor(waitfor, "bcast")
        request = driver.bcast(self._buffer(buf, "bcast buf"), _whole(count, "bcast: count"),
                               _index(root, "bcast: root"), _index(comm_id, "bcast: comm_id"), bool(from_fpga),
                               bool(to_fpga), self._compress(compress_dtype, "bcast: compress_dtype"),
                               bool(run_async), deps)
        return self._finish(request, run_async, (buf,))

    def scatter(self, sbuf, rbuf, count, root, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False,
                compress_dtype=None, run_async=False, waitfor=None):
        """Scatter data to all ACCL instances in a communicator.

        Args:
            sbuf (ACCLBuffer): Buffer from which to send data (root: count elements per rank)
            rbuf (ACCLBuffer): Buffer into which to receive data (count elements)
            count (int): Number of elements each rank receives
            root (int): Index of the root, i.e. the ACCL instance which sends from sbuf.
            comm_id, from_fpga, to_fpga, compress_dtype, run_async, waitfor: as for
                allgather.
        """
        driver = self._live_driver("scatter")
        deps = self._waitfor(waitfor, "scatter")
        request = driver.scatter(self._buffer(sbuf, "scatter sbuf"), self._buffer(rbuf, "scatter rbuf"),
                                 _whole(count, "scatter: count"), _index(root, "scatter: root"),
                                 _index(comm_id, "scatter: comm_id"), bool(from_fpga), bool(to_fpga),
                                 self._compress(compress_dtype, "scatter: compress_dtype"), bool(run_async), deps)
        return self._finish(request, run_async, (sbuf, rbuf))

    def gather(self, sbuf, rbuf, count, root, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False,
               compress_dtype=None, run_async=False, waitfor=None):
        """Gathers data from all ACCL instances in a communicator.

        Args:
            sbuf (ACCLBuffer): Buffer from which to send data (count elements)
            rbuf (ACCLBuffer): Buffer into which to receive data (root: count elements per rank)
            count (int): Number of elements each rank sends
            root (int): Index of the root, i.e. the ACCL instance which receives into rbuf.
            comm_id, from_fpga, to_fpga, compress_dtype, run_async, waitfor: as for
                allgather.
        """
        driver = self._live_driver("gather")
        deps = self._waitfor(waitfor, "gather")
        request = driver.gather(self._buffer(sbuf, "gather sbuf"), self._buffer(rbuf, "gather rbuf"),
                                _whole(count, "gather: count"), _index(root, "gather: root"),
                                _index(comm_id, "gather: comm_id"), bool(from_fpga), bool(to_fpga),
                                self._compress(compress_dtype, "gather: compress_dtype"), bool(run_async), deps)
        return self._finish(request, run_async, (sbuf, rbuf))

    def allgather(self, sbuf, rbuf, count, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False,
                  compress_dtype=None, run_async=False, waitfor=None):
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
            waitfor (list of handles, optional): Calls (handles returned with run_async=True by
                this instance) that must complete before this one starts. Defaults to none.

        Returns:
            handle to call: When run_async is True, returns a handle which can be waited on.
            Otherwise, returns None.
        """
        driver = self._live_driver("allgather")
        deps = self._waitfor(waitfor, "allgather")
        request = driver.allgather(self._buffer(sbuf, "allgather sbuf"), self._buffer(rbuf, "allgather rbuf"),
                                   _whole(count, "allgather: count"), _index(comm_id, "allgather: comm_id"),
                                   bool(from_fpga), bool(to_fpga),
                                   self._compress(compress_dtype, "allgather: compress_dtype"), bool(run_async), deps)
        return self._finish(request, run_async, (sbuf, rbuf))

    def reduce(self, sbuf, rbuf, count, root, func, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False,
               compress_dtype=None, run_async=False, waitfor=None):
        """Combine data from multiple ACCL instances, using a reduction function.

        Args:
            sbuf (ACCLBuffer): Buffer from which to send data
            rbuf (ACCLBuffer): Buffer into which to receive data (root only)
            count (int): Number of elements to reduce
            root (int): Index of the root, i.e. the ACCL instance which writes to rbuf.
            func (int): Index of function to be applied from ACCLReduceFunctions
            comm_id, from_fpga, to_fpga, compress_dtype, run_async, waitfor: as for
                allgather.
        """
        driver = self._live_driver("reduce")
        deps = self._waitfor(waitfor, "reduce")
        request = driver.reduce(self._buffer(sbuf, "reduce sbuf"), self._buffer(rbuf, "reduce rbuf"),
                                _whole(count, "reduce: count"), _index(root, "reduce: root"),
                                _index(func, "reduce: func"), _index(comm_id, "reduce: comm_id"), bool(from_fpga),
                                bool(to_fpga), self._compress(compress_dtype, "reduce: compress_dtype"),
                                bool(run_async), deps)
        return self._finish(request, run_async, (sbuf, rbuf))

    def allreduce(self, sbuf, rbuf, count, func, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False,
                  compress_dtype=None, run_async=False, waitfor=None):
        """Fused reduce-bcast.

        Args:
            sbuf (ACCLBuffer): Buffer from which to send data
            rbuf (ACCLBuffer): Buffer into which to receive data
            count (int): Number of elements to reduce
            func (int): Index of function to be applied from ACCLReduceFunctions
            comm_id, from_fpga, to_fpga, compress_dtype, run_async, waitfor: as for
                allgather.
        """
        driver = self._live_driver("allreduce")
        deps = self._waitfor(waitfor, "allreduce")
        request = driver.allreduce(self._buffer(sbuf, "allreduce sbuf"), self._buffer(rbuf, "allreduce rbuf"),
                                   _whole(count, "allreduce: count"), _index(func, "allreduce: func"),
                                   _index(comm_id, "allreduce: comm_id"), bool(from_fpga), bool(to_fpga),
                                   self._compress(compress_dtype, "allreduce: compress_dtype"), bool(run_async), deps)
        return self._finish(request, run_async, (sbuf, rbuf))

    def reduce_scatter(self, sbuf, rbuf, count, func, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False,
                       compress_dtype=None, run_async=False, waitfor=None):
        """Fused reduce-scatter.

        Args:
            sbuf (ACCLBuffer): Buffer from which to send data (count elements per rank)
            rbuf (ACCLBuffer): Buffer into which to receive data (count elements)
            count (int): Number of elements each rank receives
            func (int): Index of function to be applied from ACCLReduceFunctions
            comm_id, from_fpga, to_fpga, compress_dtype, run_async, waitfor: as for
                allgather.
        """
        driver = self._live_driver("reduce_scatter")
        deps = self._waitfor(waitfor, "reduce_scatter")
        request = driver.reduce_scatter(self._buffer(sbuf, "reduce_scatter sbuf"),
                                        self._buffer(rbuf, "reduce_scatter rbuf"),
                                        _whole(count, "reduce_scatter: count"), _index(func, "reduce_scatter: func"),
                                        _index(comm_id, "reduce_scatter: comm_id"), bool(from_fpga), bool(to_fpga),
                                        self._compress(compress_dtype, "reduce_scatter: compress_dtype"),
                                        bool(run_async), deps)
        return self._finish(request, run_async, (sbuf, rbuf))

    def alltoall(self, sbuf, rbuf, count, comm_id=GLOBAL_COMM, from_fpga=False, to_fpga=False,
                 compress_dtype=None, run_async=False, waitfor=None):
        """Extension: all-to-all exchange of ``count`` elements per pair of ranks.

        Args:
            sbuf (ACCLBuffer): count elements for each rank, in rank order
            rbuf (ACCLBuffer): receives count elements from each rank, in rank order
            comm_id, from_fpga, to_fpga, compress_dtype, run_async, waitfor: as for
                allgather.
        """
        driver = self._live_driver("alltoall")
        deps = self._waitfor(waitfor, "alltoall")
        request = driver.alltoall(self._buffer(sbuf, "alltoall sbuf"), self._buffer(rbuf, "alltoall rbuf"),
                                  _whole(count, "alltoall: count"), _index(comm_id, "alltoall: comm_id"),
                                  bool(from_fpga), bool(to_fpga),
                                  self._compress(compress_dtype, "alltoall: compress_dtype"), bool(run_async), deps)
        return self._finish(request, run_async, (sbuf, rbuf))

    def barrier(self, comm_id=GLOBAL_COMM, waitfor=None):
        """Blocks until every rank of the communicator has entered the barrier (after the calls in
        ``waitfor`` completed)."""
        driver = self._live_driver("barrier")
        deps = self._waitfor(waitfor, "barrier")
        driver.barrier(_index(comm_id, "barrier: comm_id"), False, deps)

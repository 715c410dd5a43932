# SPDX-License-Identifier: Apache-2.0
"""ACCLBuffer: a numpy array whose memory is the host side of an ACCL buffer.

The driver allocates the buffer (device memory plus a page-aligned host
mirror, or host-only memory the CCLO reaches directly) and the array is a
view of that host memory, so writing the array fills the mirror that
``sync_to_device`` (or any call without ``from_fpga``) copies to the device.

Views of an ACCLBuffer (``buf[16:32]``, a row of a 2-D buffer) are ACCL
buffers too when they are contiguous: calls use the matching slice of the
device buffer. Arrays numpy computes from buffers (``a + b``, ``a.copy()``)
keep the ACCLBuffer type but own their memory; calls reject them.
"""

import math
import numbers

import numpy as np

from . import _pyaccl
from .errors import ACCLArgumentError

# numpy dtype -> data type the driver knows. The 8/16-bit and unsigned types
# work on devices that report them (ACCL.supports(function, type)).
_NATIVE_TYPES = {
    np.dtype(np.float16): _pyaccl.DataType.float16,
    np.dtype(np.float32): _pyaccl.DataType.float32,
    np.dtype(np.float64): _pyaccl.DataType.float64,
    np.dtype(np.int32): _pyaccl.DataType.int32,
    np.dtype(np.int64): _pyaccl.DataType.int64,
    np.dtype(np.int8): _pyaccl.DataType.int8,
    np.dtype(np.uint8): _pyaccl.DataType.uint8,
    np.dtype(np.int16): _pyaccl.DataType.int16,
    np.dtype(np.uint16): _pyaccl.DataType.uint16,
    np.dtype(np.uint32): _pyaccl.DataType.uint32,
    np.dtype(np.uint64): _pyaccl.DataType.uint64,
}


def native_type(dtype, what="dtype"):
    """The driver's DataType for a numpy dtype (or anything np.dtype() takes)."""
    try:
        key = np.dtype(dtype)
    except TypeError as e:
        raise ACCLArgumentError(f"{what}: {dtype!r} is not a numpy data type") from e
    try:
        return _NATIVE_TYPES[key]  # native byte order only: the CCLO computes in little endian
    except KeyError:
        supported = ", ".join(sorted({t.name for t in _NATIVE_TYPES}))
        raise ACCLArgumentError(f"{what}: data type {key} is not supported by ACCL (supported: {supported})") from None


def _shape_tuple(shape):
    if isinstance(shape, numbers.Integral):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def _driver_of(target):
    """The native driver behind an accl instance (or a native driver itself)."""
    driver = getattr(target, "_driver", target)
    if not isinstance(driver, _pyaccl.Driver):
        raise ACCLArgumentError("ACCLBuffer: target must be the accl instance to allocate on; use accl.allocate()")
    return driver


class ACCLBuffer(np.ndarray):
    """A numpy array backed by ACCL memory. Create it with :meth:`pyaccl.accl.accl.allocate`.

    Args:
        shape (tuple): Shape of the array.
        dtype (NumPy datatype, optional): float16, float32, float64, int32, int64 (or int8/uint8
            for byte data). Defaults to np.float32.
        target (accl): The accl instance whose device holds the buffer.
        zmqsocket: Accepted for compatibility with the 2022 pyaccl, where it named the simulator
            instance holding the buffer; here the buffer lives on ``target``'s device (with
            ``sim_sock``, in that session instance's device or host memory).
        physical_address (int, optional): Not supported: the driver places buffers.
        prealloc (bool, optional): Accepted for compatibility; device memory is always
            reserved at creation.
        host_only (bool, optional): Extension: allocate host memory the CCLO reads and
            writes directly (no syncs needed). Defaults to False.
    """

    def __new__(cls, shape, dtype=np.float32, target=None, zmqsocket=None, physical_address=None,
                prealloc=True, *, host_only=False):
        del zmqsocket, prealloc  # see the docstring
        if target is None:
            raise ACCLArgumentError("ACCLBuffer: no target; allocate buffers with accl.allocate()")
        if physical_address is not None:
            raise ACCLArgumentError("allocate: physical_address is not supported; the driver places buffers")
        driver = _driver_of(target)
        shape = _shape_tuple(shape)
        if any(s < 0 for s in shape):
            raise ACCLArgumentError(f"allocate: negative dimension in shape {shape}")
        dtype = np.dtype(dtype)
        native = driver.create_buffer(math.prod(shape), native_type(dtype, "allocate"), bool(host_only))
        # numpy keeps `native` alive as the array's base, and with it the
        # driver buffer whose host memory this array is.
        obj = super().__new__(cls, shape, dtype=dtype, buffer=native)
        obj._accl_native = native
        return obj

    def __array_finalize__(self, obj):
        # Views share the root buffer; _native_view() checks whether an
        # array's memory actually lies inside it.
        self._accl_native = getattr(obj, "_accl_native", None)

    def _native_view(self, what="buffer"):
        """The driver buffer (or slice of it) holding exactly this array's elements."""
        native = getattr(self, "_accl_native", None)
        if native is None:
            raise ACCLArgumentError(f"{what}: the array is not ACCL memory; allocate buffers with accl.allocate()")
        if self.size == 0:
            return native.slice(0, 0)
        offset = self.__array_interface__["data"][0] - native.host_address
        if offset < 0 or offset + self.nbytes > native.nbytes:
            raise ACCLArgumentError(f"{what}: the array is a copy, not ACCL memory; "
                                    "pass a buffer from accl.allocate() or a view of one")
        if native_type(self.dtype) != native.type:
            raise ACCLArgumentError(f"{what}: a {self.dtype} view of a buffer allocated as a different type")
        if not self.flags.c_contiguous or offset % self.itemsize != 0:
            raise ACCLArgumentError(f"{what}: only contiguous views of an ACCL buffer can be passed to calls")
        if offset == 0 and self.nbytes == native.nbytes:
            return native
        start = offset // self.itemsize
        return native.slice(start, start + self.size)

    def sync_to_device(self):
        """Copy buffer data in the host to device direction."""
        self._native_view("sync_to_device").sync_to_device()

    def sync_from_device(self):
        """Copy buffer data in the device to host direction."""
        self._native_view("sync_from_device").sync_from_device()

    @property
    def device_address(self):
        """Get physical address in FPGA memory.

        Returns:
            int: Physical address
        """
        return self._native_view("device_address").address

    @property
    def host_only(self):
        """True for host-only buffers (the CCLO accesses host memory directly)."""
        return self._native_view("host_only").host_only

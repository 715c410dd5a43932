# SPDX-License-Identifier: Apache-2.0
"""Exceptions raised by pyaccl.

Every driver error becomes an :class:`ACCLError` naming the call and the
rank; the subclasses also derive from the matching built-in exception so
generic handlers (``except ValueError``, ``except TimeoutError``) work.
"""

from .constants import ErrorCode


class ACCLError(RuntimeError):
    """An ACCL call failed. ``call`` names the call, ``rank`` the local rank (-1: unknown)."""

    def __init__(self, message, call="", rank=-1):
        super().__init__(message)
        self.call = call
        self.rank = rank


class ACCLDeviceError(ACCLError):
    """The CCLO finished the call with error bits set in RETCODE.

    ``retcode`` is the raw bit mask, ``error_codes`` the :class:`ErrorCode`
    members of its bits.
    """

    def __init__(self, message, call="", rank=-1, retcode=0):
        super().__init__(message, call, rank)
        self.retcode = retcode
        self.error_codes = ErrorCode.decode(retcode)


class ACCLTimeoutError(ACCLError, TimeoutError):
    """The driver gave up waiting for the device (device timeout: ACCL_TIMEOUT_MS)."""


class ACCLArgumentError(ACCLError, ValueError):
    """The call was rejected before reaching the device: bad count, rank,
    root, buffer, data type, function or communicator, or a call before
    initialization / after deinit()."""


_KINDS = {
    "device": ACCLDeviceError,
    "timeout": ACCLTimeoutError,
    "argument": ACCLArgumentError,
    "error": ACCLError,
}


def _from_native(kind, message, call, rank, retcode):
    """Called by the extension module to build the exception for a C++ driver error."""
    cls = _KINDS.get(kind, ACCLError)
    if cls is ACCLDeviceError:
        return cls(message, call, rank, retcode)
    return cls(message, call, rank)

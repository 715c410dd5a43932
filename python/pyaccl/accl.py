# SPDX-License-Identifier: Apache-2.0
"""The ACCL Python driver (seed 003 "ACCL"): class :class:`accl` and :class:`ACCLArithConfig`.

Each :class:`accl` instance drives one CCLO through libaccl (the C++ driver):
an emulated CCLO running in this process (``sim_mode=True``), one instance of
a public ACCL simulation session (``sim_mode=True, sim_sock=...``) or a CCLO
on an Alveo card (``xclbin=...``). Calls release the GIL while the device
works, so several instances can be driven from Python threads (seed 000).

The class's calls are in pyaccl._calls, seed 001's configuration calls in
pyaccl._setup, the checks of its arguments in
pyaccl._checks and the arithmetic configurations in pyaccl._arith; every
name of the 2022 pyaccl.accl stays importable from here.
"""

import sys
import threading

import numpy as np

from . import _pyaccl, _sim
from ._arith import ACCL_DEFAULT_ARITH_CONFIG, ACCLArithConfig, _native_arith_config
from ._calls import ACCLRequest, _DeviceCalls
from ._setup import _SetupCalls
from ._checks import _index, _parse_endpoint, _rank_record, _whole
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

_PROTOCOLS = ("TCP", "UDP", "RDMA")


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


class accl(_DeviceCalls, _SetupCalls, metaclass=_SubmoduleAccess):  # noqa: N801 (seed 003 name)
    """ACCL Python Driver.

    Args:
        nranks (int): Number of ranks (ACCL instances) in the global communicator.
        local_rank (int): This instance's rank.
        ranks (list, optional): One entry per rank: a dict with ``ip``, ``port`` and optionally
            ``session_id`` and ``max_segment_size`` (bytes; 0 = bufsize), an ``(ip, port)`` tuple
            or ``"ip:port"``. On the bundled emulator this instance's CCLO listens on its own
            entry. Defaults: bundled emulator: the emulated CCLOs of this process's instances
            with the same nranks; simulator session: 127.0.0.1, port P + i, session id i (as
            public ACCL's drivers name a session's instances); hardware: 127.0.0.1 port 9000 + i.
        protocol (str, optional): "TCP", "UDP" or "RDMA": the network stack of the xclbin.
            The emulator picks its transport itself (ACCL_EMU_TRANSPORT).
        nbufs (int, optional): Number of RX (eager) buffers. Defaults to 16.
        bufsize (int, optional): Bytes per RX buffer; also the largest message sent eagerly.
            Defaults to 1024.
        arith_config (dict, optional): {(uncompressed dtype, compressed dtype): ACCLArithConfig}.
        sim_mode (bool, optional): Run on a simulated CCLO: the instance of a public ACCL
            simulation session that ``sim_sock`` names, else (ACCL_DEVICE=sim) the one of
            ACCL_SIM_ADDRESS's session, else the bundled emulator in this process (the default).
            Defaults to False.
        xclbin (str, optional): Bitstream for hardware mode (XRT backend).
        sim_sock (str, optional): ``"tcp://host:port"`` of this rank's instance in a public ACCL
            simulation session (``cclo_emu -s nranks -r local_rank -p P`` or the RTL simulation):
            port P + local_rank, as the 2022 pyaccl connected to it. The session must already run.
        board_idx (int, optional): Alveo card index in hardware mode (default: ACCL_DEVICE_INDEX,
            else the card nearest to this process).
        cclo_idx (int, optional): Which CCLO of the xclbin (kernel instance ccl_offload_<i>).
            Defaults to 0.
    """

    def __init__(self, nranks, local_rank, ranks=None, protocol=None, nbufs=16, bufsize=1024,
                 arith_config=ACCL_DEFAULT_ARITH_CONFIG, sim_mode=False, xclbin=None, sim_sock=None,
                 board_idx=None, cclo_idx=0):
        self._driver = None  # first, so deinit()/__del__ work after a failed constructor
        self._device_kind = "no device"  # for messages: emulator, simulator session or xclbin
        self._pending_lock = threading.Lock()
        self._pending = []  # handles of async calls not known to be complete
        self._timeout_us = None  # set_timeout's value, kept across reconfigurations
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
            driver, ranks = self._open_simulated(ranks, native_arith)
        elif xclbin is not None:
            self._device_kind = f"xclbin {xclbin}"
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
        # The bundled emulator's CCLOs listen where the rank list says; other devices' rank
        # lists only describe the network (configure_communicator may change them).
        self._endpoints_fixed = self._device_kind == "emulator"
        self._configure_device(driver, ranks, self.nbufs, self.bufsize)
        self._driver = driver

    def _open_simulated(self, ranks, native_arith):
        """sim_mode's device (see the sim_mode argument) and the rank list of its world."""
        if self.sim_sock is not None:
            host, port = _parse_endpoint(self.sim_sock, "sim_sock")
            base = port - self.local_rank
            if base < 1 or base + self.nranks - 1 > 0xFFFF:
                raise ACCLArgumentError(f"accl: sim_sock port {port} of rank {self.local_rank} leaves no port range "
                                        f"for {self.nranks} ranks (rank i listens on port {base} + i)")
            return self._open_session(f"tcp://{host}:{base}", ranks, native_arith)
        if _pyaccl.selected_device() == "sim":
            return self._open_session("", ranks, native_arith)
        self._device_kind = "emulator"
        return self._open_emulator(ranks, native_arith)

    def _open_session(self, rank0_address, ranks, native_arith):
        """This rank's instance of a public simulation session; rank0_address '' is ACCL_SIM_ADDRESS."""
        self._device_kind = "simulator session"
        driver, ip, port, session_ids = _pyaccl.create_simulated(rank0_address, self.local_rank, self.nranks,
                                                                 native_arith)
        if ranks is None:
            base = port - self.local_rank
            # The factory names rank r's instance 127.0.0.1:P+r and gives every rank's session id.
            ranks = [{"ip": ip, "port": base + i, "session_id": session_ids[i], "max_segment_size": 0}
                     for i in range(self.nranks)]
        return driver, ranks

    def _open_emulator(self, ranks, native_arith):
        """This rank's emulated CCLO (in this process) and the rank list of its world."""
        if ranks is not None:
            me = ranks[self.local_rank]
            return _pyaccl.create_emulated(me["ip"], me["port"], native_arith), ranks
        driver, endpoints = _sim.claim_emulated_rank(self.nranks, self.local_rank, native_arith)
        ranks = [{"ip": ip, "port": port, "session_id": i, "max_segment_size": 0}
                 for i, (ip, port) in enumerate(endpoints)]
        return driver, ranks

    def __repr__(self):
        return f"<pyaccl.accl rank {self.local_rank} of {self.nranks} on {self._device_kind}>"

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
        timeout_us = int(seconds * 1_000_000)
        self._live_driver("set_timeout").set_timeout_us(timeout_us)
        self._timeout_us = timeout_us

    def supports(self, func, dtype=None):
        """Whether the CCLO implements reduce function ``func`` (ACCLReduceFunctions), and with ``dtype``
        (a numpy type) whether it implements it on that type."""
        driver = self._live_driver("supports")
        if dtype is None:
            return driver.supports(_index(func, "supports: func"))
        return driver.supports_on(_index(func, "supports: func"), native_type(dtype, "supports: dtype"))

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

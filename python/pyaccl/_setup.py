# SPDX-License-Identifier: Apache-2.0
"""Seed 001's configuration calls of an :class:`~pyaccl.accl.accl` instance: ``setup_rx_buffers``,
``configure_communicator``, ``open_port`` and ``open_con``.

In the 2022 pyaccl these four brought a freshly programmed CCLO up, in that order. Here the
constructor already does the first two (from ``nbufs``, ``bufsize`` and ``ranks``), so a script
written for seed 001 runs unchanged: a call that asks for what is configured changes nothing, and
one that asks for something else reconfigures the CCLO with it. ``open_port`` and ``open_con``
have nothing to do on any device pyaccl opens (see their docstrings) and only check their argument.
Every bad argument raises ACCLArgumentError naming the call.
"""

from ._checks import _index, _rank_record, _whole
from .constants import GLOBAL_COMM
from .errors import ACCLArgumentError

# Rendezvous scratch buffers are capped like public ACCL's accl_network_utils
# (min(nbufs * bufsize, 4 MiB)): enough for its flat-tree reduce sizes
# without reserving large device memory per instance.
_MAX_RENDEZVOUS_CAP = 4 * 1024 * 1024


class _SetupCalls:
    """Mixed into :class:`~pyaccl.accl.accl`, which sets ``_driver``, ``nranks``, ``local_rank``, ``ranks``,
    ``nbufs``, ``bufsize``, ``_pending``/``_pending_lock`` and ``_timeout_us`` (None until set_timeout)."""

    def _configure_device(self, driver, ranks, nbufs, bufsize):
        """Configures the CCLO: RX buffers, the global communicator and the message size limits."""
        max_rendezvous = min(nbufs * bufsize, _MAX_RENDEZVOUS_CAP)
        driver.initialize([(r["ip"], r["port"], r["session_id"], r["max_segment_size"]) for r in ranks],
                          self.local_rank, nbufs, bufsize, bufsize, max_rendezvous)
        if self._timeout_us is not None:
            driver.set_timeout_us(self._timeout_us)
        self.ranks, self.nbufs, self.bufsize = ranks, nbufs, bufsize

    def _reconfigure(self, what, ranks, nbufs, bufsize):
        """Resets and configures the CCLO again, once no call of this instance is running."""
        driver = self._live_driver(what)
        with self._pending_lock:
            running = [h for h in self._pending if not h.done()]
        if running:
            raise ACCLArgumentError(f"{what}: {len(running)} call(s) started with run_async=True are still "
                                    "running; wait for them before reconfiguring the CCLO")
        driver.deinit()
        self._configure_device(driver, ranks, nbufs, bufsize)

    def setup_rx_buffers(self, nbufs=16, bufsize=1024, devicemem=None):
        """RX (eager) buffers: ``nbufs`` buffers of ``bufsize`` bytes in the CCLO's memory.

        The constructor already set them up from its ``nbufs`` and ``bufsize``; asking for the same
        changes nothing. Other values reset the CCLO and configure it again with them (messages up to
        ``bufsize`` bytes then go eagerly): call it on every rank, before any communication.
        Communicators made by split_communicator are dropped by such a reconfiguration.

        Args:
            nbufs (int, optional): Number of RX buffers (at least 1). Defaults to 16.
            bufsize (int, optional): Bytes per RX buffer (at least 1). Defaults to 1024.
            devicemem (int, optional): Memory bank of the buffers: None or 0, the bank the driver
                places them in (the CCLO's first bank).
        """
        nbufs = _index(nbufs, "setup_rx_buffers: nbufs")
        bufsize = _whole(bufsize, "setup_rx_buffers: bufsize")
        if nbufs < 1 or bufsize < 1:
            raise ACCLArgumentError(f"setup_rx_buffers: nbufs ({nbufs}) and bufsize ({bufsize}) must be at least 1")
        if devicemem is not None and (isinstance(devicemem, bool) or devicemem != 0):
            raise ACCLArgumentError(f"setup_rx_buffers: devicemem {devicemem!r} is not available: RX buffers live "
                                    "in the CCLO's first memory bank (devicemem=None or 0)")
        self._live_driver("setup_rx_buffers")
        if (nbufs, bufsize) != (self.nbufs, self.bufsize):
            self._reconfigure("setup_rx_buffers", self.ranks, nbufs, bufsize)

    def configure_communicator(self, ranks, local_rank):
        """The global communicator: where each of the ``nranks`` CCLOs is reached.

        The constructor already configured it (from its ``ranks``, or the device's own endpoints);
        the same list changes nothing. A different list resets the CCLO and configures it again:
        call it on every rank, before any communication (communicators made by split_communicator
        are dropped). On the bundled emulator the endpoints (ip, port) are where the emulated CCLOs
        listen and cannot change; ``session_id`` and ``max_segment_size`` can.

        Args:
            ranks (list): One entry per rank, as the constructor's ``ranks``: a dict with ``ip``,
                ``port`` and optionally ``session_id`` and ``max_segment_size``, an ``(ip, port)``
                tuple or ``"ip:port"``.
            local_rank (int): This instance's rank; must be the constructor's ``local_rank``.
        """
        what = "configure_communicator"
        if isinstance(ranks, (str, bytes, dict)) or not hasattr(ranks, "__iter__"):
            raise ACCLArgumentError(f"{what}: ranks must be a list of {self.nranks} rank entries")
        try:
            records = [_rank_record(entry, i) for i, entry in enumerate(ranks)]
        except ACCLArgumentError as e:
            raise ACCLArgumentError(f"{what}: {e}") from None
        if len(records) != self.nranks:
            raise ACCLArgumentError(f"{what}: {len(records)} ranks given; this instance has nranks={self.nranks}")
        rank = _index(local_rank, f"{what}: local_rank")
        if rank != self.local_rank:
            raise ACCLArgumentError(f"{what}: local_rank {rank} differs from this instance's rank "
                                    f"{self.local_rank}; the device was opened for that rank")
        self._live_driver(what)
        if records == self.ranks:
            return
        if self._endpoints_fixed:
            for i, (new, old) in enumerate(zip(records, self.ranks)):
                if (new["ip"], new["port"]) != (old["ip"], old["port"]):
                    raise ACCLArgumentError(
                        f"{what}: ranks[{i}] is {new['ip']}:{new['port']}, but that emulated CCLO listens on "
                        f"{old['ip']}:{old['port']}; pass ranks= to accl() to choose where emulated CCLOs listen")
        self._reconfigure(what, records, self.nbufs, self.bufsize)

    def _check_communicator(self, comm_id, what):
        driver = self._live_driver(what)
        comm = _index(comm_id, f"{what}: comm_id")
        try:
            driver.get_comm_size(comm)
        except ACCLArgumentError as e:
            raise ACCLArgumentError(f"{what}: communicator {comm} does not exist ({e})") from None
        return comm

    def open_port(self, comm_id=GLOBAL_COMM):
        """Opens the CCLO's network port for the ranks of communicator ``comm_id``.

        Nothing to do on any device pyaccl opens, so this only checks that ``comm_id`` exists:
        the bundled emulator connects to a peer on first use; a public simulator session's
        instances are connected by the session itself (public ACCL's firmware has no open-port
        call); a card's network stack is brought up outside the calls (hw/README.md).

        Args:
            comm_id (int, optional): Index in the internal communicator list. Defaults to 0.
        """
        self._check_communicator(comm_id, "open_port")

    def open_con(self, comm_id=GLOBAL_COMM):
        """Opens connections to the other ranks of communicator ``comm_id``.

        Like open_port: nothing to do on any device pyaccl opens; checks that ``comm_id`` exists.

        Args:
            comm_id (int, optional): Index in the internal communicator list. Defaults to 0.
        """
        self._check_communicator(comm_id, "open_con")

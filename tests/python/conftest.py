# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: one emulated world of WORLD ranks per test module.

Collective calls block until every rank of the communicator takes part, so
each test hands a per-rank function to ``world.run`` which runs it for all
ranks at once, one thread per rank (the calls release the GIL).

Run with `meson test -C <build> python-pytest`, or directly:
    PYTHONPATH=<build>/python:python /usr/bin/python3 -m pytest tests/python
"""

import concurrent.futures

import pytest

from pyaccl import accl

WORLD = 4
# Per-call device timeout inside tests: a broken call fails in seconds
# instead of waiting for the default (ACCL_TIMEOUT_MS).
CALL_TIMEOUT_S = 5.0
# How long the test waits for all ranks of one round.
ROUND_TIMEOUT_S = 60.0


class World:
    """WORLD sim_mode instances of one process and a thread per rank to drive them."""

    def __init__(self, size=WORLD, **kwargs):
        self.size = size
        self.instances = [accl(size, i, sim_mode=True, **kwargs) for i in range(size)]
        for inst in self.instances:
            inst.set_timeout(CALL_TIMEOUT_S)
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=size, thread_name_prefix="rank")
        # A failed round may leave messages in flight that a later round
        # would receive: the fixture replaces a broken world.
        self.broken = False

    def run(self, fn, ranks=None):
        """Calls fn(rank, instance) for every rank (or the given ones) concurrently; returns the results."""
        ranks = range(self.size) if ranks is None else ranks
        futures = [self.pool.submit(fn, r, self.instances[r]) for r in ranks]
        try:
            return [f.result(timeout=ROUND_TIMEOUT_S) for f in futures]
        except BaseException:
            self.broken = True
            raise

    def close(self):
        self.pool.shutdown(wait=True)
        for inst in self.instances:
            inst.deinit()
        self.instances = []


@pytest.fixture(scope="module")
def world_cache():
    holder = {}
    yield holder
    if "world" in holder:
        holder["world"].close()


@pytest.fixture
def world(world_cache):
    """The module's world, rebuilt if an earlier test broke it."""
    current = world_cache.get("world")
    if current is None or current.broken:
        if current is not None:
            current.close()
        current = world_cache["world"] = World()
    return current

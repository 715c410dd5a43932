# SPDX-License-Identifier: Apache-2.0
"""How sim_mode instances of one process find each other.

Seed 000 creates ``accl(WORLD_SIZE, i, sim_mode=True)`` one rank at a time
and gives no rank list. The first rank of a world creates the emulated CCLOs
of all ranks at once (each listening on a free port), and every later rank
of the same size claims its own device from that world. A rank index that is
already taken starts a new world, so creating a second world after the first
one works the same way.
"""

import threading

from . import _pyaccl

_lock = threading.Lock()
_open_worlds = {}  # (nranks, bind_address) -> EmuWorld with unclaimed ranks


def claim_emulated_rank(nranks, local_rank, arith, bind_address=""):
    """Returns (driver, [(ip, port) of every rank]) for rank ``local_rank`` of an nranks world."""
    key = (nranks, bind_address)
    with _lock:
        world = _open_worlds.get(key)
        if world is None or world.claimed(local_rank):
            world = _pyaccl.EmuWorld(nranks, bind_address)
            _open_worlds[key] = world
        driver = world.claim(local_rank, arith)
        endpoints = world.endpoints
        if all(world.claimed(i) for i in range(nranks)):
            del _open_worlds[key]  # complete: the instances own the devices now
    return driver, endpoints

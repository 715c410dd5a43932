# SPDX-License-Identifier: Apache-2.0
"""Finding a block of consecutive free loopback ports, for the tests that hand out one base port
and let every rank derive its own from it (legacy sim_sock, cclo_emu's -p)."""

import socket


def block_is_free(base, count):
    """True when every port of base .. base+count-1 on 127.0.0.1 can be bound right now."""
    if base + count - 1 > 0xFFFF:
        return False
    socks = []
    try:
        for port in range(base, base + count):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()

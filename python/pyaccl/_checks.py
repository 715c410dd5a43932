# SPDX-License-Identifier: Apache-2.0
"""Checks and conversions of what users pass to :class:`~pyaccl.accl.accl`: counts, ranks and other
indices, endpoints and rank lists."""

import numbers
import operator

from .errors import ACCLArgumentError


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

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the hand-made seed and regression inputs of tests/fuzz/corpus/.

The files are committed; this script documents what each one is and
regenerates them if a harness's input format changes:

    python3 tests/fuzz/make_corpus.py

Input formats: see the harness sources (fuzz_receive_sink.cpp: run(),
fuzz_tcp_stream.cpp: LLVMFuzzerTestOneInput, fuzz_firmware.cpp: run()).
Files named repro-* reproduce reported bugs (see tests/fuzz/FINDINGS.md).
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

MSG_EAGER, MSG_RNDZV_DATA, MSG_RNDZV_ADDR, MSG_RNDZV_DONE, MSG_RNDZV_REQ = range(5)


def header(count=0, tag=0, src=0, seqn=0, strm=0, dst=0, msg_type=0, host=0, vaddr=0, ctx=0, msg_bytes=0, rid=0,
           flags=0, reserved=(0, 0, 0, 0)):
    """abi::WireHeader, 64 bytes, little endian."""
    h = struct.pack("<IIIIIHBBQIIII4I", count, tag, src, seqn, strm, dst, msg_type, host, vaddr, ctx, msg_bytes, rid,
                    flags, *reserved)
    assert len(h) == 64
    return h


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- receive_sink ----------------------------------------------------------------
# setup: rx count, rx size index (0,64,100,1024,4096), flags; then ops:
#   0 begin(slot, peer, mode, header64)  2 write(slot, u16 pieces of 64)
#   3 end(slot, status)  4 pop(policy: 0 hold, 1 double release, 2 release)
#   6 release_held(i)  7 open_window(buf, peer, ctx, rid, rid_hi, off/64, u16 bytes, how)
#   8 close_window(i)  9 reset/link_failed(sel, ...)
def rs_setup(count=4, size_index=3, flags=0):
    return bytes([count, size_index, flags])


def rs_begin(slot, peer, mode, hdr):
    return bytes([0, slot, peer, mode]) + hdr


def rs_end(slot, ok=True):
    return bytes([3, slot, 1 if ok else 0])


def rs_pop(policy=2):
    return bytes([4, policy])


def rs_open(buf, peer, ctx, rid, off64, nbytes, how=0):
    return bytes([7, buf, peer, ctx, rid, 0, off64]) + struct.pack("<H", nbytes) + bytes([how])


write("receive_sink", "seed-eager", rs_setup() + rs_begin(0, 0, 0, header(count=100, tag=5, src=1)) + rs_end(0) +
      rs_pop())
write("receive_sink", "seed-eager-interleaved",
      rs_setup() + rs_begin(0, 0, 0, header(count=700, tag=1)) + rs_begin(1, 1, 0, header(count=300, tag=2)) +
      bytes([2, 0, 3, 0]) + bytes([2, 1, 1, 0]) + rs_end(1) + rs_end(0, ok=False) + rs_pop() + rs_pop())
write("receive_sink", "seed-header-only",
      rs_setup() + rs_begin(0, 2, 0, header(msg_type=MSG_RNDZV_REQ, msg_bytes=1 << 20, rid=77)) + rs_end(0) + rs_pop())
# Window at buffer 0 offset 0, 256 bytes, from peer 0, ctx 1, rid 2; then
# rendezvous data built from it (mode 1, no field flipped), and one with the
# count flipped (must be refused).
write("receive_sink", "seed-rendezvous",
      rs_setup() + rs_open(0, 0, 1, 2, 0, 256) + rs_begin(0, 0, 1, header()) + rs_end(0) + rs_pop() +
      rs_open(1, 0, 1, 3, 0, 512) + rs_begin(1, 0, 1, header(src=16)) + rs_end(1) + rs_pop())
write("receive_sink", "seed-overflow",
      rs_setup(count=1, size_index=1) + rs_begin(0, 0, 0, header(count=1000)) + rs_end(0) +
      rs_begin(0, 0, 0, header(count=50)) + rs_end(0) + rs_begin(0, 0, 0, header(count=60)) + rs_end(0) +
      rs_pop(0) + rs_pop(1) + rs_pop(2) + bytes([6, 0]))
write("receive_sink", "seed-stream",
      rs_setup() + rs_begin(0, 0, 0, header(count=100, strm=9 + 3)) + rs_end(0))
write("receive_sink", "seed-reset-link",
      rs_setup() + rs_begin(0, 0, 0, header(count=10)) + rs_end(0) + rs_pop(0) + bytes([9, 0, 2, 3, 0]) +
      bytes([9, 1, 1, 1]) + bytes([6, 0]) + rs_pop())
# Bug "stream-alloc": a kernel-stream header announcing 0xFFFFFFFF bytes makes
# the sink allocate (and zero) 4 GiB.
write("receive_sink", "repro-stream-alloc",
      rs_setup() + rs_begin(0, 0, 0, header(count=0xFFFFFFFF, strm=9)))

# --- tcp_stream --------------------------------------------------------------------
# flags (bit 0 valid hello, bit 1 structured messages, bit 2 claim 10.0.0.1,
# bit 3 claim 0.0.0.0, bits 4..7 port), piece selector (0 -> 4096-byte pieces),
# window offset/64, u16 window bytes, then the stream.
def tcp(flags, window_bytes, rest, piece=0, window_off=0):
    return bytes([flags, piece, window_off]) + struct.pack("<H", window_bytes) + rest


write("tcp_stream", "seed-eager", tcp(1, 256, header(count=100, tag=3) + bytes(range(100))))
write("tcp_stream", "seed-two-messages-small-pieces",
      bytes([1, 1, 5]) + bytes([0]) + struct.pack("<H", 256) + header(count=10) + bytes(10) +
      header(msg_type=MSG_RNDZV_REQ, msg_bytes=5000, rid=9))
# Structured: msg_type % 3 == 1 aims at the window (tag 0: exact match).
write("tcp_stream", "seed-rendezvous", tcp(1 | 2, 256, header(msg_type=1) + header(count=20)))
write("tcp_stream", "seed-bad-magic", tcp(0, 0, b"\x00" * 48 + header(count=4)))
write("tcp_stream", "seed-handshake-only", tcp(1, 0, b""))
write("tcp_stream", "seed-truncated", tcp(1, 0, header(count=5000) + bytes(100)))
write("tcp_stream", "repro-stream-alloc", tcp(1, 0, header(count=0xFFFFFFFF, strm=9)))

# --- firmware ------------------------------------------------------------------------
# configure: flags (bit 7 raw calls, bit 0 max segment = RX size), P-2, local
# rank, RX count-1, RX size index (64, 256, 1024), eager index (64, 1024,
# 4096, max), rendezvous index (0, 64, 256, 32768), timeout (1 + n ms); then
# events: 0-2 call, 3-4 eager, 5 RTS, 6 grant, 7 window completion, 8 link
# error, 9 time. See fuzz_firmware.cpp.
SC_SEND, SC_RECV, SC_BCAST, SC_SCATTER, SC_GATHER, SC_REDUCE, SC_ALLGATHER, SC_ALLREDUCE = range(8)


def fw_config(P=2, local=0, flags=0, rx_count=16, rx_size_index=2, eager_index=1, rndzv_index=3, timeout=0):
    return bytes([flags, P - 2, local, rx_count - 1, rx_size_index, eager_index, rndzv_index, timeout])


def fw_call(scenario_index, count, root=1, tag=5, opts=0):
    # count selector 3: 1 + u16 % 3000; counts above that use raw u16 through selector 3 too.
    return bytes([0, scenario_index, opts, 3]) + struct.pack("<H", count - 1) + bytes([root, tag])


def fw_eager(src, count, tag=5, collective=False, seqn_sel=0, opts=0):
    return bytes([3, src, opts | (1 if collective else 0), 2, tag, seqn_sel]) + struct.pack("<H", count)


def fw_rts(src, rid, nbytes, tag=5):
    return bytes([5, src, 0, 2, tag, 0, rid]) + struct.pack("<H", nbytes)


def fw_grant(src, nbytes, offset=0, tag=5):
    return bytes([6, src, 0, 2, tag, 0]) + struct.pack("<Q", 0x123456) + struct.pack("<HH", nbytes, offset)


def fw_complete(src=1):
    return bytes([7, src, 0, 2, 5, 0])


write("firmware", "seed-recv-eager", fw_config() + fw_call(SC_RECV, 100) + fw_eager(1, 400))
write("firmware", "seed-recv-rendezvous",
      fw_config() + fw_call(SC_RECV, 2000) + fw_rts(1, 9, 8000) + fw_complete())
write("firmware", "seed-send-rendezvous", fw_config() + fw_call(SC_SEND, 2000) + fw_grant(1, 8000))
write("firmware", "seed-allreduce-3",
      fw_config(P=3) + fw_call(SC_ALLREDUCE, 300, root=0) + fw_eager(1, 400, collective=True) +
      fw_eager(2, 400, collective=True) + fw_complete(1) + fw_complete(2))
write("firmware", "seed-bcast-timeout", fw_config(P=4, local=2) + fw_call(SC_BCAST, 50, root=0) + bytes([9, 0x10, 0x27]))
write("firmware", "seed-link-error", fw_config() + fw_call(SC_RECV, 100) + bytes([8, 1, 0, 2, 5]))

print("corpus written under", os.path.join(HERE, "corpus"))

// SPDX-License-Identifier: Apache-2.0
#include "receive_sink.hpp"

#include "net_address.hpp"

#include <accl/log.hpp>

#include <algorithm>

namespace accl::emu {

namespace {
// Arrival tokens handed to the firmware (release_payload):
//   RX buffer: bit 63 | generation (31 bits) << 32 | RX index
//   overflow:  bit 62 | generation (22 bits) << 40 | offset in the overflow bank
constexpr uint64_t kRxTokenBit = uint64_t{1} << 63;
constexpr uint64_t kOverflowTokenBit = uint64_t{1} << 62;
constexpr uint64_t kOffsetMask = DeviceMemory::kOffsetMask;

uint64_t rx_token(uint32_t generation, uint32_t index) {
  return kRxTokenBit | (uint64_t{generation & 0x7FFFFFFFu} << 32) | index;
}
uint64_t overflow_token(uint32_t generation, uint64_t offset) {
  return kOverflowTokenBit | (uint64_t{generation & 0x3FFFFFu} << 40) | (offset & kOffsetMask);
}

uint32_t rx_record(uint32_t index) { return abi::kRxBufferTableOffset + index * abi::kRxBufferRecordBytes; }
constexpr uint32_t kMaxRxBuffers = (abi::kConfigAreaEnd - abi::kRxBufferTableOffset) / abi::kRxBufferRecordBytes;

// Target of header-only messages: transports get a valid pointer and write 0 bytes.
std::byte g_no_payload[8];

const char* type_name(uint8_t t) {
  switch (t) {
    case abi::kMsgEager: return "eager";
    case abi::kMsgRendezvousData: return "rendezvous data";
    case abi::kMsgRendezvousAddr: return "rendezvous address";
    case abi::kMsgRendezvousDone: return "rendezvous done";
    case abi::kMsgRendezvousRequest: return "rendezvous request";
    default: return "unknown";
  }
}
}  // namespace

ReceiveSink::ReceiveSink(ExchangeMemory& xmem, DeviceMemory& memory, KernelStream& streams, Wakeup& firmware_doorbell,
                         std::chrono::nanoseconds stream_timeout)
    : xmem_(xmem), memory_(memory), streams_(streams), doorbell_(firmware_doorbell), stream_timeout_(stream_timeout) {
  // Made up front: records for as many transfers in flight at once as a
  // busy rank sees (a collective opens a window per peer, point-to-point
  // adds its own), so the first time that many overlap, perhaps after
  // thousands of calls, allocates nothing on the data path. Left to first
  // use, tests/pmpi/test_alloc.c saw 4 allocations (record, map node, write
  // lease, spare list) on one rank in about one run of three.
  in_flight_.reserve(kMaxSpareInFlight);
  spare_in_flight_.reserve(kMaxSpareInFlight);
  for (size_t i = 0; i < kPreparedInFlight; ++i) {
    auto record = std::make_unique<InFlight>();
    record->lease = std::make_shared<WriteLease>();
    in_flight_.emplace(0, std::move(record));
    spare_in_flight_.push_back(in_flight_.extract(0));
  }
}

ReceiveSink::~ReceiveSink() = default;

void ReceiveSink::push_arrival(const fw::Arrival& a) {
  arrivals_.push_back(a);
  arrival_count_.fetch_add(1, std::memory_order_acq_rel);
}

ReceiveSink::InFlight& ReceiveSink::add_in_flight(uint64_t token) {
  if (spare_in_flight_.empty()) return *in_flight_.emplace(token, std::make_unique<InFlight>()).first->second;
  InFlightMap::node_type node = std::move(spare_in_flight_.back());
  spare_in_flight_.pop_back();
  node.key() = token;
  InFlight& f = *node.mapped();
  f.generation = 0;
  f.window = fw::Window{};  // (its data was given back when it retired)
  f.landing = LandingReduce{};
  in_flight_.insert(std::move(node));
  return f;
}

void ReceiveSink::retire_in_flight(InFlightMap::iterator it) {
  // Kept: as many as were in flight at once, up to a bound (a burst of
  // kernel-stream messages must not pin its buffers forever).
  InFlightMap::node_type node = in_flight_.extract(it);
  if (spare_in_flight_.size() >= kMaxSpareInFlight) return;
  InFlight& f = *node.mapped();
  f.data = std::vector<std::byte>();  // stream payloads are large: give them back
  spare_in_flight_.push_back(std::move(node));
}

void ReceiveSink::error_arrival(fw::ArrivalKind kind, const NetAddress& from, const abi::WireHeader& h,
                                uint32_t status) {
  fw::Arrival a;
  a.kind = kind;
  a.header = h;
  a.status = status;
  a.peer_ip = from.ip;
  a.peer_port = from.port;
  push_arrival(a);
}

std::byte* ReceiveSink::place_eager(const NetAddress& from, const abi::WireHeader& h, ReceiveTicket& t) {
  // Driver writes the count last: 0 means "table not (yet) configured".
  uint32_t count = std::min(xmem_.load(abi::kRxBufferCountOffset), kMaxRxBuffers);
  uint32_t size = xmem_.load(abi::kRxBufferSizeOffset);
  if (count > 0 && h.count <= size) {
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t rec = rx_record(i);
      // ENQUEUED = "a write is posted into this buffer": claims it against
      // other transport threads and shows up in dump_rx_buffers().
      if (!xmem_.compare_exchange(rec + 4 * abi::kRxStatus, abi::kRxIdle, abi::kRxEnqueued)) continue;
      uint64_t addr = xmem_.load(rec + 4 * abi::kRxAddrLow) | (uint64_t{xmem_.load(rec + 4 * abi::kRxAddrHigh)} << 32);
      std::byte* p = nullptr;
      bool host = false;
      // RX buffers normally live in a device bank; accept host_only ones too.
      if (memory_.resolve(addr, false, size, p) != 0) host = memory_.resolve(addr, true, size, p) == 0;
      if (p == nullptr) {
        xmem_.store(rec + 4 * abi::kRxStatus, abi::kRxIdle);
        ACCL_LOG_ERROR("emulated CCLO: RX buffer {} at 0x{:x} ({} bytes) is not valid memory; skipped", i, addr, size);
        continue;
      }
      t.kind = kRxBuffer;
      t.rx_index = i;
      t.token = (uint64_t{generation_} << 1) | (host ? 1 : 0);
      return p;
    }
  }
  // No idle RX buffer: keep the message in the bounded overflow store rather
  // than stalling the link (hardware would apply back-pressure).
  if (auto addr = memory_.overflow().allocate(h.count)) {
    t.kind = kOverflow;
    t.token = *addr;
    t.rx_index = generation_;
    return memory_.overflow().translate(*addr, h.count);
  }
  ACCL_LOG_ERROR("emulated CCLO: no RX buffer and no overflow space (ACCL_EMU_OVERFLOW_BYTES) for {} bytes from {} "
                 "(tag {}, seqn {}); message discarded",
                 h.count, to_string(from), h.tag, h.seqn);
  error_arrival(fw::ArrivalKind::message, from, h, abi::kDmaSizeError);
  t.kind = kDiscard;
  return nullptr;
}

std::vector<ReceiveSink::OpenWindow>::iterator ReceiveSink::window_of(const NetAddress& peer,
                                                                      const abi::WireHeader& h) {
  return std::find_if(windows_.begin(), windows_.end(), [&](const OpenWindow& o) {
    return o.w.peer_ip == peer.ip && o.w.peer_port == peer.port && o.w.ctx == h.ctx && o.w.rid == h.rid;
  });
}

std::byte* ReceiveSink::place_rendezvous(const NetAddress& from, const abi::WireHeader& h, ReceiveTicket& t) {
  auto it = window_of(from, h);
  uint32_t err = 0;
  if (it == windows_.end()) err = abi::kDmaDecodeError;
  else if (it->w.addr != h.vaddr || it->w.host != (h.host != 0)) err = abi::kDmaDecodeError;
  else if (it->w.bytes != h.count) err = abi::kDmaSizeError;
  if (err != 0) {
    if (it == windows_.end())
      ACCL_LOG_ERROR("emulated CCLO: rendezvous data from {} (ctx {}, rid {}, {} bytes at 0x{:x}) matches no open "
                     "window; discarded",
                     to_string(from), h.ctx, h.rid, h.count, h.vaddr);
    else
      ACCL_LOG_ERROR("emulated CCLO: rendezvous data from {} (ctx {}, rid {}) does not fit its window: {} bytes at "
                     "0x{:x}{} vs window {} bytes at 0x{:x}{}; discarded",
                     to_string(from), h.ctx, h.rid, h.count, h.vaddr, h.host ? " (host)" : "", it->w.bytes,
                     it->w.addr, it->w.host ? " (host)" : "");
    error_arrival(fw::ArrivalKind::rendezvous_done, from, h, err);
    t.kind = kDiscard;
    return nullptr;
  }
  // One window, one transfer: take it out so a duplicate cannot write again.
  // (Window::compressed needs no action: payload bytes land as they come,
  // the flag tells the firmware how to read them.)
  // The transport keeps writing after this returns: it does so under a
  // lease that close_window() can revoke if the receive fails meanwhile.
  t.kind = kWindow;
  t.token = next_token_++;
  InFlight& f = add_in_flight(t.token);
  f.generation = generation_;
  f.window = it->w;
  // A recycled lease is reused only when nobody else holds it (a revoker may
  // still be waiting on an old one); other copies are made under mutex_.
  if (f.lease && f.lease.use_count() == 1) f.lease->rearm();
  else f.lease = std::make_shared<WriteLease>();
  t.lease = f.lease;
  if (it->w.reduce) {
    f.landing = it->landing;
    t.landing = &f.landing;
  }
  std::byte* p = it->ptr;
  windows_.erase(it);
  return h.count == 0 ? g_no_payload : p;
}

std::byte* ReceiveSink::begin_message(const NetAddress& from, const abi::WireHeader& h, ReceiveTicket& t) {
  t = ReceiveTicket{};
  std::lock_guard<std::mutex> lock(mutex_);
  if (h.strm != 0 && h.msg_type != abi::kMsgRendezvousData) {
    // stream_put: straight to the kernel stream (public ACCL bypass path).
    // The size comes from the wire: bound it like unexpected eager data, so
    // one header cannot make this process allocate gigabytes (fuzz finding
    // stream-alloc).
    if (h.count > memory_.overflow().size()) {
      ACCL_LOG_ERROR("emulated CCLO: kernel-stream message of {} bytes from {} exceeds ACCL_EMU_OVERFLOW_BYTES ({}); "
                     "discarded",
                     h.count, to_string(from), memory_.overflow().size());
      t.kind = kDiscard;
      return nullptr;
    }
    t.kind = kStream;
    t.token = next_token_++;
    InFlight& f = add_in_flight(t.token);
    f.generation = generation_;
    f.data.resize(h.count);
    return h.count == 0 ? g_no_payload : f.data.data();
  }
  switch (h.msg_type) {
    case abi::kMsgRendezvousData:
      return place_rendezvous(from, h, t);
    case abi::kMsgEager:
    case abi::kMsgRendezvousAddr:
    case abi::kMsgRendezvousDone:
    case abi::kMsgRendezvousRequest:
      if (h.count == 0) {
        t.kind = kHeaderOnly;
        t.token = generation_;
        return g_no_payload;
      }
      return place_eager(from, h, t);
    default:
      ACCL_LOG_ERROR("emulated CCLO: message of unknown type {} from {} ({} bytes) discarded", h.msg_type,
                     to_string(from), h.count);
      t.kind = kDiscard;
      return nullptr;
  }
}

void ReceiveSink::end_message(const NetAddress& from, const abi::WireHeader& h, ReceiveTicket& t, uint32_t status) {
  // A window that reduces on landing: what the transport stored raw or out
  // of order is reduced now, before the firmware hears of it (outside
  // mutex_, under the write lease, which a failed receive may have revoked).
  if (t.kind == kWindow && t.landing != nullptr && status == 0 && t.lease->begin_write()) {
    t.landing->finish(h.count);
    t.lease->end_write();
  }
  std::vector<std::byte> stream_data;
  bool deliver_stream = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (status != 0 && t.kind != kDiscard)
      ACCL_LOG_WARN("emulated CCLO: {} message from {} ({} bytes, seqn {}) broke off (status 0x{:x}); discarded",
                    type_name(h.msg_type), to_string(from), h.count, h.seqn, status);
    fw::Arrival a;
    a.kind = fw::ArrivalKind::message;
    a.header = h;
    a.peer_ip = from.ip;
    a.peer_port = from.port;
    switch (t.kind) {
      case kDiscard:
        break;  // the error was reported in begin_message
      case kHeaderOnly:
        if (status == 0 && t.token == generation_) push_arrival(a);
        break;
      case kRxBuffer: {
        uint32_t gen = static_cast<uint32_t>(t.token >> 1);
        if (gen != generation_) break;  // table may have been rewritten after a reset: do not touch it
        uint32_t rec = rx_record(t.rx_index);
        if (status != 0) {
          xmem_.store(rec + 4 * abi::kRxStatus, abi::kRxIdle);
          break;
        }
        xmem_.store(rec + 4 * abi::kRxTag, h.tag);
        xmem_.store(rec + 4 * abi::kRxLen, h.count);
        xmem_.store(rec + 4 * abi::kRxSrc, h.src);
        xmem_.store(rec + 4 * abi::kRxSeqn, h.seqn);
        xmem_.store(rec + 4 * abi::kRxStatus, abi::kRxReserved);  // publishes the fields above
        a.payload_addr = xmem_.load(rec + 4 * abi::kRxAddrLow) | (uint64_t{xmem_.load(rec + 4 * abi::kRxAddrHigh)} << 32);
        a.payload_host = (t.token & 1) != 0;
        a.rx_index = t.rx_index;
        a.token = rx_token(gen, t.rx_index);
        push_arrival(a);
        break;
      }
      case kOverflow: {
        uint64_t addr = t.token;
        if (status != 0 || t.rx_index != generation_) {
          memory_.overflow().free(addr);
          break;
        }
        uint64_t offset = addr - memory_.overflow().base();
        overflow_live_[offset] = generation_;
        a.payload_addr = addr;
        a.payload_host = false;
        a.token = overflow_token(generation_, offset);
        push_arrival(a);
        break;
      }
      case kWindow: {
        auto it = in_flight_.find(t.token);
        if (it == in_flight_.end()) break;
        const bool revoked = it->second->lease->revoked();
        if (revoked) {
          // Its receive was abandoned (close_window) or the datapath reset:
          // nobody waits for this transfer, and what was not written is lost.
          ACCL_LOG_INFO("emulated CCLO: rendezvous data from {} (ctx {}, rid {}, {} bytes) arrived after its window "
                        "was closed; dropped",
                        to_string(from), h.ctx, h.rid, h.count);
        }
        if (it->second->generation == generation_) {
          // Reported even when dropped: the message took a sequence number,
          // and the firmware must count it (a completion nobody waits for is
          // then discarded there), or the next message from that peer looks
          // like a gap (test CollectiveMismatch.NamedErrorNeverWrongData: the
          // allreduce after an aborted one failed with PACK_SEQ_NUMBER_ERROR).
          a.kind = fw::ArrivalKind::rendezvous_done;
          a.status = revoked ? abi::kDmaDecodeError : status != 0 ? (status | abi::kLinkError) : 0;
          push_arrival(a);
        }
        // The ticket's copy of the lease goes first: a record retired while
        // the ticket still held it would be reused with a fresh lease (an
        // allocation) by a message that begins before this call returns.
        t.lease.reset();
        t.landing = nullptr;
        retire_in_flight(it);
        break;
      }
      case kStream: {
        auto it = in_flight_.find(t.token);
        if (it == in_flight_.end()) break;
        if (status == 0 && it->second->generation == generation_) {
          stream_data = std::move(it->second->data);
          deliver_stream = true;
        }
        retire_in_flight(it);
        break;
      }
    }
  }
  if (deliver_stream) {
    uint32_t id = h.strm >= abi::kStreamIdOffset ? h.strm - abi::kStreamIdOffset : h.strm;
    // Back-pressure: this link waits (bounded) while the kernel stream is full.
    const size_t bytes = stream_data.size();
    if (streams_.push(id, std::move(stream_data), Clock::now() + stream_timeout_) ==
        KernelStream::PushStatus::full)
      ACCL_LOG_ERROR("emulated CCLO: kernel stream {} stayed full ({} of {} bytes queued) for {} ms; {} bytes "
                     "stream_put by {} (seqn {}) dropped (KRNL_TIMEOUT_STS_ERROR)",
                     id, streams_.available(), streams_.capacity(),
                     std::chrono::duration_cast<std::chrono::milliseconds>(stream_timeout_).count(), bytes,
                     to_string(from), h.seqn);
  }
  t = ReceiveTicket{};
  doorbell_.ring();
}

void ReceiveSink::link_failed(const NetAddress& peer, uint32_t status) {
  ACCL_LOG_WARN("emulated CCLO: link from {} failed (status 0x{:x})", to_string(peer), status);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    abi::WireHeader h{};
    error_arrival(fw::ArrivalKind::link_error, peer, h, status != 0 ? status : abi::kLinkError);
  }
  if (on_link_failure_) on_link_failure_(peer);
  doorbell_.ring();
}

bool ReceiveSink::pop_arrival(fw::Arrival& out) {
  if (arrival_count_.load(std::memory_order_acquire) == 0) return false;  // cheap poll for the firmware loop
  std::lock_guard<std::mutex> lock(mutex_);
  if (arrivals_.empty()) return false;
  out = arrivals_.front();
  arrivals_.pop_front();
  arrival_count_.fetch_sub(1, std::memory_order_acq_rel);
  return true;
}

bool ReceiveSink::pop_arrival_for(uint32_t context_id, uint32_t src, fw::Arrival& out) {
  if (arrival_count_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!arrivals_.take_first_if([&](const fw::Arrival& a) { return fw::arrival_is_for(a, context_id, src); }, out)) {
    return false;
  }
  arrival_count_.fetch_sub(1, std::memory_order_acq_rel);
  return true;
}

void ReceiveSink::release_locked(uint64_t token) {
  if (token & kRxTokenBit) {
    uint32_t gen = static_cast<uint32_t>(token >> 32) & 0x7FFFFFFFu;
    uint32_t index = static_cast<uint32_t>(token);
    if (gen != (generation_ & 0x7FFFFFFFu) || index >= kMaxRxBuffers) return;  // stale (reset since)
    xmem_.store(rx_record(index) + 4 * abi::kRxStatus, abi::kRxIdle);
  } else if (token & kOverflowTokenBit) {
    uint64_t offset = token & kOffsetMask;
    uint32_t gen = static_cast<uint32_t>(token >> 40) & 0x3FFFFFu;
    auto it = overflow_live_.find(offset);
    if (it == overflow_live_.end() || (it->second & 0x3FFFFFu) != gen) return;
    memory_.overflow().free(memory_.overflow().base() + offset);
    overflow_live_.erase(it);
  }
}

void ReceiveSink::release_payload(const fw::Arrival& a) {
  if (a.token == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  release_locked(a.token);
}

uint32_t ReceiveSink::open_window(const fw::Window& w, const ArithFunction* landing_fn) {
  std::byte* p = nullptr;
  if (memory_.resolve(w.addr, w.host, w.bytes, p) != 0) {
    ACCL_LOG_ERROR("emulated CCLO: rendezvous window of {} bytes at 0x{:x}{} is not valid memory", w.bytes, w.addr,
                   w.host ? " (host)" : "");
    return abi::kInvalidArgument;
  }
  LandingReduce landing;
  if (w.reduce) {
    const std::byte* operand = nullptr;
    if (landing_fn == nullptr || w.bytes % elem_bytes(landing_fn->type) != 0) {
      ACCL_LOG_ERROR("emulated CCLO: rendezvous window of {} bytes at 0x{:x} reduces on landing without a function "
                     "for whole elements",
                     w.bytes, w.addr);
      return abi::kArithError;
    }
    if (memory_.resolve_source(w.operand_addr, w.operand_host, w.bytes, operand) != 0 ||
        (w.bytes > 0 && operand < p + w.bytes && p < operand + w.bytes)) {
      ACCL_LOG_ERROR("emulated CCLO: the operand of a rendezvous window that reduces on landing ({} bytes at "
                     "0x{:x}{}) is not valid memory or overlaps the window at 0x{:x}",
                     w.bytes, w.operand_addr, w.operand_host ? " (host)" : "", w.addr);
      return abi::kInvalidArgument;
    }
    landing = LandingReduce(*landing_fn, operand, p);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& o : windows_) {
    if (o.w.peer_ip == w.peer_ip && o.w.peer_port == w.peer_port && o.w.ctx == w.ctx && o.w.rid == w.rid) {
      ACCL_LOG_ERROR("emulated CCLO: rendezvous window (peer {}, ctx {}, rid {}) is already open",
                     to_string(NetAddress{w.peer_ip, static_cast<uint16_t>(w.peer_port)}), w.ctx, w.rid);
      return abi::kInvalidArgument;
    }
  }
  windows_.push_back(OpenWindow{w, p, landing});
  return 0;
}

void ReceiveSink::revoke_all(const std::vector<std::shared_ptr<WriteLease>>& leases, const char* why) {
  // A writer holds a lease for one bounded piece (a memcpy or non-blocking
  // recv of at most WriteLease::kMaxPieceBytes), never across I/O waits, so
  // this is normally over in microseconds; the bound only guards against a
  // writer thread that is not scheduled for a long time.
  constexpr auto kMaxWait = std::chrono::seconds(2);
  for (const auto& lease : leases) {
    if (!lease->revoke(std::chrono::steady_clock::now() + kMaxWait))
      ACCL_LOG_ERROR("emulated CCLO: {}: a transport was still writing into a revoked rendezvous window after {} s",
                     why, kMaxWait.count());
  }
}

void ReceiveSink::close_window(const fw::Window& w) {
  // The firmware closes exactly the window it opened. With the same (peer,
  // ctx, rid) a window may be open again while the transfer into an earlier
  // one is still being written (fuzz finding rendezvous-no-arrival): closing
  // the open one must not cut off that transfer, so both lookups compare
  // every field, and a window that was still open had no transfer to revoke
  // (only a peer's direct writes, which the fence ends).
  auto same = [&](const fw::Window& o) {
    return o.peer_ip == w.peer_ip && o.peer_port == w.peer_port && o.ctx == w.ctx && o.rid == w.rid &&
           o.addr == w.addr && o.host == w.host && o.bytes == w.bytes;
  };
  std::vector<std::shared_ptr<WriteLease>> revoke;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    bool offered = false;
    const size_t erased = std::erase_if(windows_, [&](const OpenWindow& o) {
      if (!same(o.w)) return false;
      offered = offered || o.direct;
      return true;
    });
    if (erased > 0) {
      // Still open, so no data arrived; but a peer may be writing the
      // payload into it directly right now.
      if (offered) offered_since_fence_ = false;
      lock.unlock();
      if (offered) fence_direct_writes("close_window");
      return;
    }
    // Not open any more: its transfer has begun. If it has not ended, a
    // transport thread is still writing into it.
    for (const auto& [token, f] : in_flight_) {
      if (f->lease && same(f->window)) {
        ACCL_LOG_WARN("emulated CCLO: closing rendezvous window (peer {}, ctx {}, rid {}, {} bytes at 0x{:x}) while "
                      "its transfer is in flight; the rest of it is dropped",
                      to_string(NetAddress{w.peer_ip, static_cast<uint16_t>(w.peer_port)}), w.ctx, w.rid, w.bytes,
                      w.addr);
        revoke.push_back(f->lease);
      }
    }
  }
  revoke_all(revoke, "close_window");
}

size_t ReceiveSink::open_windows() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return windows_.size();
}

void ReceiveSink::reset() {
  std::vector<std::shared_ptr<WriteLease>> revoke;
  bool offered = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [token, f] : in_flight_)
      if (f->lease) revoke.push_back(f->lease);
    offered = offered_since_fence_;
    offered_since_fence_ = false;
    arrivals_.for_each([&](const fw::Arrival& a) { release_locked(a.token); });
    arrivals_.clear();
    arrival_count_.store(0, std::memory_order_release);
    windows_.clear();
    // Payloads the firmware popped but never released: their tokens go stale
    // with the generation bump, so free them here.
    for (const auto& [offset, gen] : overflow_live_) memory_.overflow().free(memory_.overflow().base() + offset);
    overflow_live_.clear();
    ++generation_;
    if (generation_ == 0) generation_ = 1;
  }
  revoke_all(revoke, "reset");
  if (offered) fence_direct_writes("reset");
  streams_.clear();
}

std::byte* ReceiveSink::direct_window(const NetAddress& peer, const abi::WireHeader& grant, size_t& bytes) {
  if (!direct_write_fence_) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = window_of(peer, grant);
  // Only the window the grant names (its data must match it exactly too). A
  // window that reduces on landing reads the payload once while it reduces;
  // written raw first, it would be read twice.
  if (it == windows_.end() || it->w.addr != grant.vaddr || it->w.host != (grant.host != 0) || it->w.reduce ||
      it->w.bytes == 0)
    return nullptr;
  it->direct = true;
  offered_since_fence_ = true;
  bytes = it->w.bytes;
  return it->ptr;
}

void ReceiveSink::fence_direct_writes(const char* why) {
  if (direct_write_fence_ && !direct_write_fence_())
    ACCL_LOG_ERROR("emulated CCLO: {}: a peer was still writing into a rendezvous window directly after the fence's "
                   "bound",
                   why);
}

}  // namespace accl::emu

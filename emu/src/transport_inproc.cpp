// SPDX-License-Identifier: Apache-2.0
//
// In-process transport: CCLOs of one process reach each other through a
// process-wide registry NetAddress -> Sink. send() runs the receiver's sink
// on the sending thread and the payload writer produces the bytes straight
// into the receiver's RX buffer / window: one copy, no thread hand-off.
#include "net_address.hpp"
#include "socket_address.hpp"
#include "transport.hpp"

#include <accl/log.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>

namespace accl::emu {
namespace {

// A registered receiver. Senders announce themselves in `active` before
// touching the sink so stop() can wait until none is inside it.
struct Endpoint {
  Sink* sink = nullptr;
  std::atomic<int> active{0};
  std::atomic<bool> closed{false};
};

class Registry {
 public:
  static Registry& instance() {
    static Registry r;
    return r;
  }
  bool add(const NetAddress& a, std::shared_ptr<Endpoint> e) {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_.emplace(address_key(a), std::move(e)).second;
  }
  void remove(const NetAddress& a, const Endpoint* e) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(address_key(a));
    if (it != map_.end() && it->second.get() == e) map_.erase(it);
  }
  std::shared_ptr<Endpoint> find(const NetAddress& a) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(address_key(a));
    return it == map_.end() ? nullptr : it->second;
  }
  bool taken(const NetAddress& a) {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_.count(address_key(a)) != 0;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<Endpoint>> map_;
};

class InprocLink final : public Link {
 public:
  InprocLink(std::weak_ptr<Endpoint> peer, const NetAddress& from) : peer_(std::move(peer)), from_(from) {}

  uint32_t send(const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point) override {
    std::shared_ptr<Endpoint> ep = peer_.lock();
    if (ep == nullptr) return abi::kLinkError;  // the peer CCLO is gone
    // seq_cst pairs with stop(): either stop() sees us active and waits, or
    // we see `closed` and stay out of the sink.
    ep->active.fetch_add(1, std::memory_order_seq_cst);
    if (ep->closed.load(std::memory_order_seq_cst)) {
      ep->active.fetch_sub(1, std::memory_order_seq_cst);
      return abi::kLinkError;
    }
    ReceiveTicket ticket;
    std::byte* dst = ep->sink->begin_message(from_, header, ticket);
    uint32_t err = 0;
    if (dst != nullptr && header.count > 0) err = produce_payload(payload, dst, header.count, ticket);
    ep->sink->end_message(from_, header, ticket, err);
    ep->active.fetch_sub(1, std::memory_order_seq_cst);
    return err;
  }

 private:
  std::weak_ptr<Endpoint> peer_;
  NetAddress from_;
};

class InprocTransport final : public Transport {
 public:
  explicit InprocTransport(const TransportOptions& options) : address_(options.bind) {
    if (address_.port == 0) address_.port = pick_port();
    // Registered under its identity, the address in the peers' records.
    address_ = transport_detail::identity_address(address_);
  }
  ~InprocTransport() override {
    stop();
    if (reservation_fd_ >= 0) ::close(reservation_fd_);
  }

  std::string name() const override { return "inproc"; }
  NetAddress local_address() const override { return address_; }

  void start(Sink& sink) override {
    if (endpoint_) return;
    auto e = std::make_shared<Endpoint>();
    e->sink = &sink;
    if (!Registry::instance().add(address_, e))
      throw std::runtime_error("emulated CCLO: address " + to_string(address_) + " is already in use in this process");
    endpoint_ = std::move(e);
  }

  std::shared_ptr<Link> connect(const NetAddress& peer, Clock::time_point) override {
    auto ep = Registry::instance().find(peer);
    if (ep == nullptr) return nullptr;  // not in this process
    return std::make_shared<InprocLink>(ep, address_);
  }

  void stop() override {
    if (!endpoint_) return;
    Registry::instance().remove(address_, endpoint_.get());
    endpoint_->closed.store(true, std::memory_order_seq_cst);
    // Senders inside the sink only copy one message; wait for them.
    while (endpoint_->active.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
    endpoint_.reset();
  }

 private:
  // Port 0: take a port number nobody else on this host uses by holding a
  // bound (not listening) TCP socket, so shared-memory names derived from
  // (ip, port) cannot clash with another process either.
  uint16_t pick_port() {
    for (int attempt = 0; attempt < 16; ++attempt) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) break;
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_addr.s_addr = htonl(address_.ip);
      sa.sin_port = 0;
      socklen_t len = sizeof(sa);
      if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
        NetAddress candidate{address_.ip, ntohs(sa.sin_port)};
        if (!Registry::instance().taken(candidate)) {
          reservation_fd_ = fd;
          return candidate.port;
        }
      }
      ::close(fd);
    }
    // The bind address is not local (or sockets are unavailable): numbers
    // only need to be unique in this process then.
    static std::atomic<uint16_t> next{49152};
    for (;;) {
      NetAddress candidate{address_.ip, next.fetch_add(1)};
      if (candidate.port != 0 && !Registry::instance().taken(candidate)) return candidate.port;
    }
  }

  NetAddress address_;
  int reservation_fd_ = -1;
  std::shared_ptr<Endpoint> endpoint_;
};

}  // namespace

std::unique_ptr<Transport> make_inproc_transport(const TransportOptions& options) {
  return std::make_unique<InprocTransport>(options);
}

}  // namespace accl::emu

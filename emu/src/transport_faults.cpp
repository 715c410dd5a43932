// SPDX-License-Identifier: Apache-2.0
#include "transport_faults.hpp"

#include "net_address.hpp"

#include <accl/config.hpp>
#include <accl/log.hpp>

#include <cmath>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace accl::emu {

bool FaultSpec::any() const {
  return drop > 0 || dup > 0 || reorder > 0 || corrupt > 0 || delay_us > 0 || slow_us > 0;
}

bool FaultSpec::applies(const NetAddress& self, const NetAddress& to) const {
  return any() && (!peer || *peer == to) && (!from || *from == self);
}

namespace {

NetAddress parse_endpoint(const std::string& key, const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("ACCL_EMU_FAULTS: " + key + " needs ip:port");
  NetAddress a;
  a.ip = parse_ipv4(text.substr(0, colon));
  const std::string port = text.substr(colon + 1);
  size_t used = 0;
  unsigned long p = 0;
  try {
    p = std::stoul(port, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != port.size() || port.empty() || p == 0 || p > 0xFFFF)
    throw std::invalid_argument("ACCL_EMU_FAULTS: bad port in " + key + "=" + text);
  a.port = static_cast<uint16_t>(p);
  return a;
}

double parse_probability(const std::string& key, const std::string& text) {
  size_t used = 0;
  double p = -1;
  try {
    p = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  // !(p <= 1) also rejects NaN.
  if (used != text.size() || text.empty() || p < 0 || !(p <= 1))
    throw std::invalid_argument("ACCL_EMU_FAULTS: " + key + " must be a probability in [0, 1], got '" + text + "'");
  return p;
}

uint64_t parse_unsigned(const std::string& key, const std::string& text, uint64_t max) {
  size_t used = 0;
  unsigned long long v = 0;
  // stoull accepts a leading '-' (wrapping around): refuse it explicitly.
  bool ok = !text.empty() && text[0] != '-';
  try {
    if (ok) v = std::stoull(text, &used, 0);
  } catch (const std::exception&) {
    ok = false;
  }
  if (!ok || used != text.size() || v > max)
    throw std::invalid_argument("ACCL_EMU_FAULTS: " + key + " must be an integer in [0, " + std::to_string(max) +
                                "], got '" + text + "'");
  return v;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A whole payload held in memory: the decorator needs it to send a message
// twice, later (reorder) or altered (corrupt); the original writer may read
// from a stream that can be consumed only once.
class BufferWriter final : public PayloadWriter {
 public:
  explicit BufferWriter(const std::vector<std::byte>& data) : data_(data) {}
  uint32_t write(std::byte* dst, size_t offset, size_t bytes) override {
    std::memcpy(dst, data_.data() + offset, bytes);
    return 0;
  }

 private:
  const std::vector<std::byte>& data_;
};

class FaultyLink final : public Link {
 public:
  FaultyLink(std::shared_ptr<Link> inner, const FaultSpec& spec, const NetAddress& self, const NetAddress& peer,
             bool message_faults)
      : inner_(std::move(inner)), spec_(spec) {
    if (!message_faults) spec_.drop = spec_.dup = spec_.reorder = spec_.corrupt = 0;
    // One random stream per directed link, so a seed reproduces the same
    // faults on every link whatever order links are opened in.
    rng_ = spec.seed ^ (address_key(self) * 0x9E3779B97F4A7C15ull) ^ (address_key(peer) * 0xC2B2AE3D27D4EB4Full);
  }

  uint32_t send(const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point deadline) override {
    // One message at a time per link: keeps the random stream and the held
    // (reordered) message consistent when several threads send.
    std::lock_guard lock(mutex_);
    // Always draw the same numbers per message, so the decision for message
    // k depends only on the seed and k, not on earlier outcomes.
    const double u_drop = uniform(), u_dup = uniform(), u_reorder = uniform(), u_corrupt = uniform();
    const uint64_t r_delay = splitmix64(rng_), r_byte = splitmix64(rng_);
    uint64_t delay_us = spec_.slow_us;
    if (spec_.delay_us > 0) delay_us += r_delay % (uint64_t{spec_.delay_us} + 1);
    if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));

    if (u_drop < spec_.drop) {
      ACCL_LOG_DEBUG("faults: dropping message seq {}", header.seqn);
      return 0;  // "sent": the loss shows only at the receiver, like on a wire
    }
    const bool dup = u_dup < spec_.dup;
    const bool corrupt = u_corrupt < spec_.corrupt && header.count > 0;
    const bool hold = u_reorder < spec_.reorder && !held_;
    if (!dup && !corrupt && !hold) return send_now_then_held(header, payload, deadline);

    std::vector<std::byte> data(header.count);
    if (header.count > 0) {
      if (uint32_t err = payload.write(data.data(), 0, header.count)) return err;
    }
    if (corrupt) data[r_byte % data.size()] ^= std::byte{0x10};
    if (hold) {
      ACCL_LOG_DEBUG("faults: holding message seq {} back", header.seqn);
      held_ = true;
      held_header_ = header;
      held_data_ = std::move(data);
      return 0;
    }
    BufferWriter writer(data);
    uint32_t err = send_now_then_held(header, writer, deadline);
    if (dup && (err & abi::kLinkError) == 0) {
      ACCL_LOG_DEBUG("faults: duplicating message seq {}", header.seqn);
      BufferWriter again(data);
      err |= inner_->send(header, again, deadline);
    }
    return err;
  }

 private:
  double uniform() { return static_cast<double>(splitmix64(rng_) >> 11) * 0x1.0p-53; }

  uint32_t send_now_then_held(const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point deadline) {
    uint32_t err = inner_->send(header, payload, deadline);
    if (held_ && (err & abi::kLinkError) == 0) {
      held_ = false;
      BufferWriter writer(held_data_);
      err |= inner_->send(held_header_, writer, deadline);
    }
    return err;
  }

  std::shared_ptr<Link> inner_;
  FaultSpec spec_;
  std::mutex mutex_;
  uint64_t rng_ = 0;
  bool held_ = false;
  abi::WireHeader held_header_{};
  std::vector<std::byte> held_data_;
};

}  // namespace

FaultSpec parse_faults(const std::string& text) {
  FaultSpec s;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("ACCL_EMU_FAULTS: '" + item + "' is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "seed") s.seed = parse_unsigned(key, value, UINT64_MAX);
    else if (key == "drop") s.drop = parse_probability(key, value);
    else if (key == "dup") s.dup = parse_probability(key, value);
    else if (key == "reorder") s.reorder = parse_probability(key, value);
    else if (key == "corrupt") s.corrupt = parse_probability(key, value);
    else if (key == "delay_us") s.delay_us = static_cast<uint32_t>(parse_unsigned(key, value, 60'000'000));
    else if (key == "slow_us") s.slow_us = static_cast<uint32_t>(parse_unsigned(key, value, 60'000'000));
    else if (key == "peer") s.peer = parse_endpoint(key, value);
    else if (key == "from") s.from = parse_endpoint(key, value);
    else throw std::invalid_argument("ACCL_EMU_FAULTS: unknown key '" + key + "'");
  }
  return s;
}

FaultSpec faults_from_environment() {
  auto text = config::get("ACCL_EMU_FAULTS");
  return text ? parse_faults(*text) : FaultSpec{};
}

std::shared_ptr<Link> wrap_with_faults(std::shared_ptr<Link> link, const FaultSpec& spec, const NetAddress& self,
                                       const NetAddress& peer, bool message_faults) {
  if (link == nullptr || !spec.applies(self, peer)) return link;
  if (!message_faults && spec.delay_us == 0 && spec.slow_us == 0) return link;
  ACCL_LOG_WARN("faults: injecting faults on the link {} -> {}", to_string(self), to_string(peer));
  return std::make_shared<FaultyLink>(std::move(link), spec, self, peer, message_faults);
}

}  // namespace accl::emu

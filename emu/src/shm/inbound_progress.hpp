// SPDX-License-Identifier: Apache-2.0
//
// What a sender that waits for ring space does for its own process's
// inbound rings, and which threads are the rings' readers.
#pragma once

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

// Set on the inbound rings' reader threads.
inline thread_local bool t_shm_reader_thread = false;

// What a sender waiting for ring space does for its own process's inbound
// rings (the transport implements it; it outlives every send, see
// ShmTransport::stop()).
class InboundProgress {
 public:
  virtual ~InboundProgress() = default;
  // Consumes what has arrived, like Transport::poll() but without renewing
  // the pollers' lease: the sending thread may be a firmware thread that
  // never says when it stops polling.
  virtual bool poll_inbound() = 0;
  // The waiting sender blocks: reader threads must deliver from now on.
  virtual void stop_polling_inbound() = 0;
};

}  // namespace shm
}  // namespace accl::emu::transport_detail

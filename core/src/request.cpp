// SPDX-License-Identifier: Apache-2.0
//
// Requests: one started call. The device call id stays allocated until the
// Request is destroyed, so a request can always be named in a later call's
// waitfor, and its result read, for as long as anybody holds it.
#include <accl/error.hpp>
#include <accl/log.hpp>

#include "internal.hpp"

#include <algorithm>

namespace accl::detail {

void DeviceContext::release_when_complete(CallId id) {
  std::lock_guard lock(orphan_mutex_);
  orphans_.push_back(id);
  orphan_count_.store(orphans_.size(), std::memory_order_release);
}

void DeviceContext::release_orphans_that_completed() {
  // An orphan added concurrently and missed here is released by a later
  // launch, as one still running would be.
  std::lock_guard lock(orphan_mutex_);
  if (orphans_.empty()) return;
  auto still_running = std::remove_if(orphans_.begin(), orphans_.end(), [this](CallId id) {
    if (!device->test(id)) return false;
    device->release(id);
    return true;
  });
  orphans_.erase(still_running, orphans_.end());
  orphan_count_.store(orphans_.size(), std::memory_order_release);
}

std::chrono::nanoseconds driver_wait_bound(std::chrono::microseconds device_timeout) {
  return device_timeout + device_timeout / 4 + std::chrono::milliseconds(100);
}

CallRequest::CallRequest(Params&& params)
    : params_(std::move(params)), launched_with_dependencies_(!params_.dependencies.empty()) {
  if (params_.id == 0) state_.store(State::completed, std::memory_order_release);
}

CallRequest::~CallRequest() {
  if (params_.id == 0) return;
  try {
    Device& device = *params_.context->device;
    if (state_.load(std::memory_order_acquire) != State::queued || device.test(params_.id))
      device.release(params_.id);
    else
      params_.context->release_when_complete(params_.id);
  } catch (const std::exception& e) {
    ACCL_LOG_WARN("releasing call '{}' failed: {}", *params_.name, e.what());
  }
}

void CallRequest::finish_dependencies() {
  if (!launched_with_dependencies_) return;
  std::vector<std::shared_ptr<CallRequest>> todo;
  {
    std::lock_guard lock(finish_mutex_);
    if (state_.load(std::memory_order_relaxed) != State::queued || params_.dependencies.empty()) return;
    todo = params_.dependencies;
  }
  std::vector<CallRequest*> visited;
  std::vector<std::shared_ptr<CallRequest>> order;  // shallow first
  while (!todo.empty()) {
    std::shared_ptr<CallRequest> dep = std::move(todo.back());
    todo.pop_back();
    if (std::find(visited.begin(), visited.end(), dep.get()) != visited.end()) continue;
    visited.push_back(dep.get());
    if (dep->state() != State::queued || !dep->params_.context->device->test(dep->params_.id)) continue;
    {
      std::lock_guard lock(dep->finish_mutex_);
      if (dep->state_.load(std::memory_order_relaxed) != State::queued) continue;
      todo.insert(todo.end(), dep->params_.dependencies.begin(), dep->params_.dependencies.end());
    }
    order.push_back(std::move(dep));
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) (*it)->finish();
}

void CallRequest::finish(const CallResult* collected) {
  // Without this, the loop below recursed through a long chain holding every
  // link's lock at once (a 100-call chain: 100 mutexes, more than
  // ThreadSanitizer can track; core-async LongNopChain under TSan).
  finish_dependencies();
  std::lock_guard lock(finish_mutex_);
  if (state_.load(std::memory_order_relaxed) != State::queued) return;
  const CallResult result = collected != nullptr ? *collected : params_.context->device->result(params_.id);
  const bool ok = result.retcode == 0;
  if (ok) {
    // The device ran this call only after its waitfor calls completed; collect
    // them so their results reach the host and a failure among them is not lost
    // when the user only waits for the end of a chain.
    for (const auto& dep : params_.dependencies) {
      if (dep->state() == State::queued && dep->params_.context->device->test(dep->params_.id)) dep->finish();
      if (dep->state() == State::failed) {
        failed_dependency_ = dep;
        break;
      }
    }
    for (const SyncRange& out : params_.outputs) out.from_device();
  }
  params_.dependencies.clear();
  retcode_.store(result.retcode, std::memory_order_relaxed);
  duration_ns_.store(result.duration_ns, std::memory_order_relaxed);
  // Publishes retcode, duration, synced outputs and failed_dependency_.
  state_.store(ok ? State::completed : State::failed, std::memory_order_release);
}

void CallRequest::throw_if_failed() const {
  const State s = state_.load(std::memory_order_acquire);
  if (s == State::failed) throw DeviceError(*params_.name, params_.rank, retcode_.load(std::memory_order_acquire));
  if (failed_dependency_) failed_dependency_->throw_if_failed();
}

void CallRequest::wait() {
  if (state() == State::queued) {
    log::ScopedRank scoped(params_.rank);
    const auto bound = driver_wait_bound(params_.timeout);
    if (!params_.context->device->wait(params_.id, bound)) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(params_.timeout).count();
      throw TimeoutError(*params_.name, params_.rank,
                         "call '" + *params_.name + "' on rank " + std::to_string(params_.rank) +
                             " did not complete within " + std::to_string(ms) + " ms");
    }
    finish();
  }
  throw_if_failed();
}

bool CallRequest::wait(std::chrono::milliseconds timeout) {
  if (state() == State::queued) {
    if (!params_.context->device->wait(params_.id, timeout)) return false;
    finish();
  }
  throw_if_failed();
  return true;
}

bool CallRequest::test() {
  if (state() == State::queued) {
    if (launched_with_dependencies_) {
      // finish() collects the dependencies before it reads this call's
      // result: a device whose result() throws for a failed call (hw) must
      // not cut that short.
      if (!params_.context->device->test(params_.id)) return false;
      finish();
    } else {
      // One device trip for "done?" and the result (a poller's common case).
      CallResult result;
      if (!params_.context->device->test_result(params_.id, result)) return false;
      finish(&result);
    }
  }
  throw_if_failed();
  return true;
}

}  // namespace accl::detail

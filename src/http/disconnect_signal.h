// DisconnectSignal: one-shot "the client went away before the response completed" flag with at
// most one callback. Shared by a connection (which fires it) and the Responder a handler holds
// (which subscribes). Thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>

namespace radixserve::http {

class DisconnectSignal {
 public:
  // Marks the signal fired and runs the callback (on the calling thread), once.
  void Fire();
  // Stores `callback`; if the signal already fired, runs it now on the calling thread instead.
  // A later Subscribe replaces an earlier, not yet run callback.
  void Subscribe(std::function<void()> callback);
  bool fired() const { return fired_.load(std::memory_order_acquire); }

 private:
  std::mutex mutex_;
  std::atomic<bool> fired_{false};
  std::function<void()> callback_;
};

}  // namespace radixserve::http

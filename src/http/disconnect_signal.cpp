#include "http/disconnect_signal.h"

#include <utility>

namespace radixserve::http {

void DisconnectSignal::Fire() {
  std::function<void()> callback;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fired_.load(std::memory_order_relaxed)) return;
    fired_.store(true, std::memory_order_release);
    callback = std::move(callback_);
    callback_ = nullptr;
  }
  if (callback) callback();
}

void DisconnectSignal::Subscribe(std::function<void()> callback) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!fired_.load(std::memory_order_relaxed)) {
      callback_ = std::move(callback);
      return;
    }
  }
  if (callback) callback();
}

}  // namespace radixserve::http

#include "api/concurrency_limit.h"

#include <utility>

namespace radixserve::api {

void ConcurrencyLimit::Slot::Release() {
  std::call_once(released_, [this] { limit_.Free(); });
}

bool ConcurrencyLimit::Enter(Start start) {
  {
    std::lock_guard lock(mu_);
    if (in_flight_ >= limit_) {
      if (!block_) return false;
      waiting_.push_back(std::move(start));
      return true;
    }
    ++in_flight_;
  }
  start(std::make_shared<Slot>(*this));
  return true;
}

void ConcurrencyLimit::Free() {
  Start next;
  {
    std::lock_guard lock(mu_);
    if (waiting_.empty()) {
      --in_flight_;
      return;
    }
    // The slot passes to the first waiting call: in_flight_ stays.
    next = std::move(waiting_.front());
    waiting_.pop_front();
  }
  next(std::make_shared<Slot>(*this));
}

}  // namespace radixserve::api

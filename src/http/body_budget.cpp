#include "http/body_budget.h"

namespace radixserve::http {

bool BodyBudget::TryTake(std::size_t bytes) {
  std::size_t used = in_use_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ || used > limit_ - bytes) return false;
  } while (!in_use_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

void BodyBudget::Give(std::size_t bytes) { in_use_.fetch_sub(bytes, std::memory_order_relaxed); }

bool BodyReservation::GrowTo(std::size_t bytes) {
  if (bytes <= bytes_) return true;
  if (!budget_.TryTake(bytes - bytes_)) return false;
  bytes_ = bytes;
  return true;
}

void BodyReservation::Reset() {
  if (bytes_ == 0) return;
  budget_.Give(bytes_);
  bytes_ = 0;
}

}  // namespace radixserve::http

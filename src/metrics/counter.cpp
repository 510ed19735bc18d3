#include "metrics/counter.h"

#include "common/check.h"

namespace radixserve::metrics {

static_assert(std::atomic<double>::is_always_lock_free);

void Counter::Inc(double amount) {
  RADIX_CHECK_MSG(amount >= 0, "counters only go up");
  value_.fetch_add(amount, std::memory_order_relaxed);
}

}  // namespace radixserve::metrics

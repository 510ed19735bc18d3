#include <algorithm>

#include "sched/schedule_policy.h"

namespace radixserve::sched {

void RandomPolicy::Order(std::vector<Sequence*>& waiting, const PolicyContext& /*context*/) {
  std::shuffle(waiting.begin(), waiting.end(), rng_);
}

}  // namespace radixserve::sched

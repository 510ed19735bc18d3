#include "sched/schedule_policy.h"

namespace radixserve::sched {

void FcfsPolicy::Order(std::vector<Sequence*>& waiting, const PolicyContext& context) {
  // Queue order is arrival order (requeued sequences were appended at the tail).
  if (context.config->enable_priority_scheduling) SortByPriority(waiting, *context.config);
}

}  // namespace radixserve::sched

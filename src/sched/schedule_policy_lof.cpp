#include <algorithm>

#include "sched/schedule_policy.h"

namespace radixserve::sched {

void LofPolicy::Order(std::vector<Sequence*>& waiting, const PolicyContext& context) {
  const SchedulerConfig& config = *context.config;
  std::stable_sort(waiting.begin(), waiting.end(), [&](const Sequence* a, const Sequence* b) {
    if (config.enable_priority_scheduling && a->priority != b->priority) {
      return config.MoreImportant(a->priority, b->priority);
    }
    return a->max_new_tokens > b->max_new_tokens;
  });
}

}  // namespace radixserve::sched

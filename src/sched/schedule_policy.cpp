#include "sched/schedule_policy.h"

#include <algorithm>
#include <string>

namespace radixserve::sched {

Expected<std::unique_ptr<SchedulePolicy>> MakeSchedulePolicy(std::string_view name,
                                                             bool cache_disabled,
                                                             uint64_t random_seed) {
  std::unique_ptr<SchedulePolicy> policy;
  if (name == "fcfs" || ((name == "lpm" || name == "dfs-weight") && cache_disabled)) {
    policy = std::make_unique<FcfsPolicy>();
  } else if (name == "lpm") {
    policy = std::make_unique<LpmPolicy>();
  } else if (name == "dfs-weight") {
    policy = std::make_unique<DfsWeightPolicy>();
  } else if (name == "lof") {
    policy = std::make_unique<LofPolicy>();
  } else if (name == "random") {
    policy = std::make_unique<RandomPolicy>(random_seed);
  } else {
    return InvalidArgument("Unknown schedule_policy: " + std::string(name));
  }
  return policy;
}

void MatchSequencePrefix(Sequence* seq, kv::PrefixCache& cache) {
  const size_t limit =
      seq->no_prefix_match ? 0 : kv::MaxPrefixMatchLen(seq->fill_len(), seq->logprob_start_len);
  const std::vector<int32_t> ids = seq->FillIds(limit);
  seq->match = cache.MatchPrefix(kv::CacheKey{ids, seq->extra_key});
  seq->sort_prefix_len = seq->match.matched_len();
}

void SortByPriority(std::vector<Sequence*>& waiting, const SchedulerConfig& config) {
  std::stable_sort(waiting.begin(), waiting.end(), [&](const Sequence* a, const Sequence* b) {
    if (a->priority != b->priority) return config.MoreImportant(a->priority, b->priority);
    return a->queue_order < b->queue_order;
  });
}

}  // namespace radixserve::sched

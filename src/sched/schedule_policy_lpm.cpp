#include <algorithm>

#include "kv/radix_cache.h"
#include "sched/schedule_policy.h"

namespace radixserve::sched {

// In-batch prefix caching: a request that matches little in the real cache but shares a long
// prefix with a request ahead of it in this pass goes last, so the first one computes the shared
// prefix and the others find it cached next pass.
void LpmPolicy::Order(std::vector<Sequence*>& waiting, const PolicyContext& context) {
  if (waiting.size() > kLpmFallbackQueueLen) {
    FcfsPolicy().Order(waiting, context);
    return;
  }
  kv::RadixCache in_batch(nullptr, nullptr, kv::RadixCacheOptions{context.page_size});
  std::vector<Sequence*> kept;
  std::vector<Sequence*> deprioritized;
  for (Sequence* seq : waiting) MatchSequencePrefix(seq, *context.cache);
  for (Sequence* seq : waiting) {
    if (seq->sort_prefix_len <= kInBatchPrefixCheckThreshold) {
      const std::vector<int32_t> ids = seq->FillIds(seq->input_ids.size());
      const kv::CacheKey key{ids, seq->extra_key};
      if (in_batch.MatchPrefix(key).matched_len() >= kInBatchPrefixDeprioritizeThreshold) {
        deprioritized.push_back(seq);
        continue;
      }
      const size_t aligned = ids.size() / static_cast<size_t>(context.page_size) *
                             static_cast<size_t>(context.page_size);
      const std::span<const int32_t> head(ids.data(), aligned);
      in_batch.Insert(kv::CacheKey{head, seq->extra_key}, head);
    }
    kept.push_back(seq);
  }
  std::stable_sort(kept.begin(), kept.end(), [](const Sequence* a, const Sequence* b) {
    return a->sort_prefix_len > b->sort_prefix_len;
  });
  kept.insert(kept.end(), deprioritized.begin(), deprioritized.end());
  waiting = std::move(kept);
}

}  // namespace radixserve::sched

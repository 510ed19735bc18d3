#include "engine/batch_builder.h"

#include <algorithm>

#include "common/check.h"

namespace radixserve::engine {

model::ForwardBatch BuildForwardBatch(const sched::StepPlan& plan, const kv::ReqToTokenPool& pool,
                                      const InputLogprobStart& input_logprob_start,
                                      std::vector<LogitRow>* rows) {
  model::ForwardBatch batch;
  rows->clear();
  const size_t total = plan.num_tokens();
  batch.token_ids.reserve(total);
  batch.positions.reserve(total);
  for (size_t e = 0; e < plan.entries.size(); ++e) {
    const sched::StepEntry& entry = plan.entries[e];
    const sched::Sequence& seq = *entry.seq;
    const size_t base = batch.token_ids.size();
    for (size_t i = 0; i < entry.extend_len; ++i) {
      const size_t pos = entry.prefix_len + i;
      batch.token_ids.push_back(seq.fill_at(pos));
      batch.positions.push_back(static_cast<int64_t>(pos));
    }
    model::SequenceExtend extend;
    if (entry.num_drafts > 0 && !seq.draft_parents.empty()) {
      // Tree drafts: a draft's rotary position is the last fill token's plus its depth.
      RADIX_CHECK(seq.draft_parents.size() == entry.num_drafts);
      const size_t first = base + entry.extend_len - entry.num_drafts;
      for (size_t d = 0; d < entry.num_drafts; ++d) {
        const int32_t parent = seq.draft_parents[d];
        batch.positions[first + d] =
            (parent < 0 ? batch.positions[first - 1]
                        : batch.positions[first + static_cast<size_t>(parent)]) +
            1;
      }
      extend.tree_parents = seq.draft_parents;
    }
    extend.prefix_len = static_cast<int64_t>(entry.prefix_len);
    extend.extend_len = static_cast<int64_t>(entry.extend_len);
    extend.kv_slots = pool.Slice(seq.kv.req_pool_slot, 0, entry.prefix_len + entry.extend_len);
    batch.sequences.push_back(extend);

    if (!entry.is_decode) {
      if (std::optional<size_t> start = input_logprob_start(seq)) {
        // Row at position p scores prompt token p + 1.
        const size_t first = std::max(entry.prefix_len, *start);
        const size_t end = std::min(entry.prefix_len + entry.extend_len, seq.input_ids.size() - 1);
        for (size_t p = first; p < end; ++p) {
          batch.logit_indices.push_back(static_cast<int64_t>(base + p - entry.prefix_len));
          rows->push_back(LogitRow{e, false, p + 1});
        }
      }
    }
    if (entry.samples) {
      // A speculative entry samples its last position before the drafts and every draft.
      for (size_t d = 0; d <= entry.num_drafts; ++d) {
        batch.logit_indices.push_back(
            static_cast<int64_t>(base + entry.extend_len - 1 - entry.num_drafts + d));
        rows->push_back(LogitRow{e, true, 0});
      }
    }
  }
  return batch;
}

}  // namespace radixserve::engine

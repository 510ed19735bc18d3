// BuildForwardBatch: turns a StepPlan into the model's ForwardBatch. Every entry contributes its
// extend tokens (fill ids [prefix_len, prefix_len + extend_len)) at their positions, with the
// request row's slots for positions [0, prefix_len + extend_len). Logits are requested for
//   * the last token of every entry that samples (a speculative decode entry: its last
//     num_drafts + 1 tokens, in order: the rows that verify the drafts), and
//   * prompt positions whose next prompt token needs an input logprob (positions p with
//     logprob_start_len <= p + 1 and p + 1 < prompt length), when the entry's request asks.
// The LogitRow list says what each logits row is for, in ForwardBatch::logit_indices order.
//
// Thread affinity: engine thread; the ForwardBatch borrows rows of the request pool, valid until
// the pool changes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "kv/req_to_token_pool.h"
#include "model/forward_batch.h"
#include "sched/step_plan.h"

namespace radixserve::engine {

struct LogitRow {
  size_t entry = 0;           // index into plan.entries
  bool sample = false;        // the entry's sampling row
  size_t input_position = 0;  // !sample: the prompt position this row scores (p + 1)
};

// For an entry: the first prompt position whose input logprob is still wanted, or nullopt.
using InputLogprobStart = std::function<std::optional<size_t>(const sched::Sequence&)>;

model::ForwardBatch BuildForwardBatch(const sched::StepPlan& plan, const kv::ReqToTokenPool& pool,
                                      const InputLogprobStart& input_logprob_start,
                                      std::vector<LogitRow>* rows);

}  // namespace radixserve::engine

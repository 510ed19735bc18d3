// StepPlan: what one engine iteration runs, as decided by Scheduler::PlanStep. The KV slots of
// every entry are already allocated and written into its request row when the plan is returned;
// the engine only builds the model input from it. A test can inspect a plan without a model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sched/sequence.h"

namespace radixserve::sched {

enum class StepKind { kIdle, kExtend, kDecode, kMixed };

struct StepEntry {
  Sequence* seq = nullptr;
  size_t prefix_len = 0;  // positions with K/V before this step
  size_t extend_len = 0;  // positions computed by this step (1 for decode)
  bool is_decode = false;
  // True when this step reaches the end of the fill ids: its last position's logits are sampled.
  // False for a prefill chunk that is not the last.
  bool samples = false;
  // Speculative decode: the last num_drafts extend tokens are the sequence's draft_ids; the
  // entry's last num_drafts + 1 positions are sampled (verified) in order.
  size_t num_drafts = 0;
};

// kRetracted / kPreempted: KV released, sequence back in the waiting queue (still held).
// kOutOfMemory: a lone running sequence that cannot get one more KV slot even after evicting the
// whole cache; it stays in the running set and the engine must abort it (Scheduler::Release).
enum class DropReason { kRetracted, kPreempted, kOutOfMemory };

struct DroppedSeq {
  Sequence* seq = nullptr;
  DropReason reason = DropReason::kRetracted;
};

struct StepPlan {
  StepKind kind = StepKind::kIdle;
  std::vector<StepEntry> entries;   // extend entries first, then decode entries
  std::vector<DroppedSeq> dropped;  // sent back to the waiting queue this step
  // Prefill log figures (SGLang's "Prefill batch" line).
  size_t new_seqs = 0;
  size_t new_tokens = 0;      // page-rounded extend tokens of admitted prefills
  size_t cached_tokens = 0;   // matched prefix tokens of admitted prefills
  size_t running_before = 0;  // running batch size before merging
  double ratio_before = 0.0;  // new_token_ratio before a retraction
  double ratio_after = 0.0;

  bool empty() const { return entries.empty(); }
  size_t num_tokens() const {
    size_t n = 0;
    for (const StepEntry& e : entries) n += e.extend_len;
    return n;
  }
};

}  // namespace radixserve::sched

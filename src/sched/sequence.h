// Sequence: the scheduler's mutable state of one generation (MLC-LLM's RequestState; the immutable
// request lives in src/engine). The engine creates and owns it (one record per request, with the
// request's state); the scheduler borrows it while it is queued or running (`held`), and the
// engine appends sampled tokens to `output_ids`.
//
// Positions: fill ids are input_ids followed by output_ids. `kv_len` positions from the start have
// K/V in the KV pool (through kv.req_pool_slot's row); the step plan extends that by extend_len.
// The last output token never has K/V until the next decode step computes it; neither do the
// tokens a grammar forced after it (jump-forward), so a decode step extends a running sequence by
// decode_len() tokens: 1, or 1 + the forced tokens, plus the speculative draft tokens.
//
// Speculative decoding: the engine may set draft_ids before a step; they are positions after the
// fill ids that the next decode step computes too (fill_at reads them), so the engine can check
// them against the model's own choices. After the step their K/V slots sit past kv_len
// (draft_kv_len of them) until the engine accepts a path (Scheduler::AcceptDrafts): accepted
// positions join kv_len, the rest are freed. Drafts never reach the prefix cache. Tree drafts
// (draft_parents) occupy positions in draft order; the accepted path is moved to the positions
// right after kv_len.
//
// Thread affinity: engine thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kv/prefix_cache.h"
#include "kv/seq_kv_state.h"

namespace radixserve::sched {

struct Sequence {
  // Identity and what was asked (fixed after creation).
  uint64_t id = 0;
  std::string rid;
  std::vector<int32_t> input_ids;
  int64_t max_new_tokens = 0;  // already capped by the context
  int64_t priority = 0;        // resolved (missing priority mapped to the least important)
  bool ignore_eos = false;
  // Input logprobs from this prompt position (nullopt: none); caps prefix matching.
  std::optional<size_t> logprob_start_len;
  bool return_logprob = false;
  // Every prompt position is computed (nothing matched from the prefix cache): the engine needs
  // each position's hidden state (return_hidden_states).
  bool no_prefix_match = false;
  std::string extra_key;  // prefix-cache namespace
  uint64_t lora_id = 0;   // LoRA adapter (load id; 0: the base model), for --max-loras-per-batch

  // Generated so far (the engine appends).
  std::vector<int32_t> output_ids;
  // Draft tokens for the next decode step (the engine's; empty without speculation), and for a
  // tree of drafts each one's parent (model::SequenceExtend::tree_parents: -1 for the children of
  // the last fill token); empty: the drafts are a chain.
  std::vector<int32_t> draft_ids;
  std::vector<int32_t> draft_parents;

  // Scheduling state (the scheduler's).
  uint64_t queue_order = 0;  // bumped on every (re)queue: FCFS ties, preemption order
  kv::SeqKvState kv;
  size_t kv_len = 0;         // positions with computed K/V
  size_t draft_kv_len = 0;   // slots past kv_len holding K/V of unaccepted drafts
  bool held = false;         // the scheduler holds it (Enqueue until Release / hand-back)
  bool admitted = false;     // holds a request row and a prefix lock
  size_t cached_tokens = 0;  // prompt tokens served by the prefix cache (first admission)
  int32_t retraction_count = 0;
  // The hierarchical cache's load for this sequence (the engine's; 0: none) and whether
  // admission waits for it (the prefetch policy): PlanStep skips the sequence meanwhile.
  uint64_t prefetch_op = 0;
  bool prefetch_wait = false;
  // The prefix-cache node holding K/V rows another server computed for this sequence
  // (GenerateRequest::prefilled_kv), locked by the engine until admission matched it.
  kv::RadixNode* transferred_prefix = nullptr;

  // Scratch of one scheduling pass (policies and admission).
  kv::MatchResult match;
  size_t sort_prefix_len = 0;

  void ClearDrafts() {
    draft_ids.clear();
    draft_parents.clear();
  }
  size_t fill_len() const { return input_ids.size() + output_ids.size(); }
  // Fill id at pos; positions past the fill ids are the drafts.
  int32_t fill_at(size_t pos) const {
    if (pos < input_ids.size()) return input_ids[pos];
    if (pos < fill_len()) return output_ids[pos - input_ids.size()];
    return draft_ids[pos - fill_len()];
  }
  std::vector<int32_t> FillIds(size_t len) const {
    std::vector<int32_t> ids(input_ids.begin(), input_ids.begin() + static_cast<ptrdiff_t>(std::min(
                                                                        len, input_ids.size())));
    for (size_t i = input_ids.size(); i < len; ++i) ids.push_back(output_ids[i - input_ids.size()]);
    return ids;
  }
  // Tokens the next decode step computes K/V for (at least 1), drafts included.
  size_t decode_len() const {
    return (fill_len() > kv_len + 1 ? fill_len() - kv_len : 1) + draft_ids.size();
  }
  // Tokens still to generate (for budget estimates).
  int64_t remaining_new_tokens() const {
    const int64_t left = max_new_tokens - static_cast<int64_t>(output_ids.size());
    return left > 0 ? left : 0;
  }
};

}  // namespace radixserve::sched

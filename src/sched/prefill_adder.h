// PrefillAdder: SGLang's per-pass admission budget (reference/sglang-runtime.md 2.5). Built once
// per scheduling pass over the current running batch; the scheduler offers it the chunked request
// first, then waiting requests in policy order, and stops at the first non-kContinue answer.
//
// Budgets (tokens; "extend" is rounded up to a page):
//   rem_total = (pool available + cache evictable) - total_offset, where total_offset starts at
//               sum over running of ClippedNewTokens (min(remaining new tokens, 4096)) *
//               new_token_ratio and grows
//               by extend + reserved new tokens per admission;
//   cur_rem   = (pool available + cache evictable) - cur_offset (input tokens only);
//   rem_input = max_prefill_tokens - mixed decode tokens;  rem_chunk likewise from
//               chunked_prefill_size (absent when chunking is off).
// Admitting locks the sequence's matched prefix node (which shrinks "evictable") and records the
// sequence's extend length; the caller then allocates the request row and KV slots.
//
// Thread affinity: engine thread only; lives for one pass.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "kv/kv_memory.h"
#include "sched/scheduler_config.h"
#include "sched/sequence.h"
#include "sched/step_plan.h"

namespace radixserve::sched {

enum class AddResult { kContinue, kNoToken, kOther };

class PrefillAdder {
 public:
  PrefillAdder(const SchedulerConfig& config, kv::KvMemory& memory,
               const std::vector<Sequence*>& running, double new_token_ratio,
               size_t mixed_decode_tokens);

  // Re-offers the request being chunk-prefilled. Returns true if a chunk was planned.
  bool AddChunkedReq(Sequence* seq);

  // Offers a waiting request whose prefix match is in seq->match. On kContinue (and on kNoToken /
  // kOther after a partial admission) check planned() for what was admitted.
  AddResult AddOneReq(Sequence* seq);

  // Admitted extends of this pass, in admission order. A chunk that does not reach the end of
  // the fill ids has samples == false.
  const std::vector<StepEntry>& planned() const { return planned_; }
  // The request this pass chunked (at most one), or nullptr.
  Sequence* new_chunked() const { return new_chunked_; }

  double rem_total_tokens() const;
  double cur_rem_tokens() const;
  int64_t rem_input_tokens() const { return rem_input_; }
  std::optional<int64_t> rem_chunk_tokens() const { return rem_chunk_; }
  AddResult BudgetState() const;
  // A request's remaining output as admission counts it: at most 4096 tokens (SGLang), or
  // SchedulerConfig::idle_new_tokens_estimate while the pool is not busy.
  int64_t ClippedNewTokens(const Sequence& seq) const {
    return std::min(seq.remaining_new_tokens(), new_tokens_clip_);
  }

 private:
  int64_t CeilPage(int64_t n) const { return (n + page_ - 1) / page_ * page_; }
  int64_t FloorPage(int64_t n) const { return n / page_ * page_; }
  void UpdateBudget(int64_t extend, int64_t reserved);
  void Plan(Sequence* seq, size_t prefix_len, size_t extend_len);
  // SGLang's path for ignore_eos requests when the prefix cache is disabled: simulates running
  // and admitted sequences finishing in order of tokens left and refuses the request if free
  // memory would ever drop to one token per still-running sequence.
  AddResult AddOneReqIgnoreEos(Sequence* seq);
  void AddReqState(const Sequence& seq, bool insert_sorted);

  const SchedulerConfig& config_;
  kv::KvMemory& memory_;
  int64_t page_;
  double total_offset_ = 0;  // fractional: running reservations scale by the ratio
  double cur_offset_ = 0;
  int64_t rem_input_ = 0;
  std::optional<int64_t> rem_chunk_;
  std::vector<Sequence*> running_;
  double new_token_ratio_;
  int64_t new_tokens_clip_;
  // (tokens left, tokens occupied) per sequence, sorted by tokens left; built on first use.
  std::optional<std::vector<std::pair<double, double>>> req_states_;
  std::vector<StepEntry> planned_;
  Sequence* new_chunked_ = nullptr;
};

}  // namespace radixserve::sched

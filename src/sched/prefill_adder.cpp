#include "sched/prefill_adder.h"

#include <algorithm>

namespace radixserve::sched {

PrefillAdder::PrefillAdder(const SchedulerConfig& config, kv::KvMemory& memory,
                           const std::vector<Sequence*>& running, double new_token_ratio,
                           size_t mixed_decode_tokens)
    : config_(config),
      memory_(memory),
      page_(memory.pool().page_size()),
      running_(running),
      new_token_ratio_(new_token_ratio),
      new_tokens_clip_(config.NewTokensEstimateClip(memory.token_usage())) {
  for (const Sequence* seq : running) {
    total_offset_ += static_cast<double>(ClippedNewTokens(*seq)) * new_token_ratio;
  }
  if (!running.empty() && config.reserved_tokens > 0) {
    total_offset_ += static_cast<double>(config.reserved_tokens);
    cur_offset_ += static_cast<double>(config.reserved_tokens);
  }
  const auto mixed = static_cast<int64_t>(mixed_decode_tokens);
  rem_input_ = config.max_prefill_tokens - mixed;
  if (config.chunked_prefill_size) rem_chunk_ = *config.chunked_prefill_size - mixed;
}

double PrefillAdder::rem_total_tokens() const {
  return static_cast<double>(memory_.allocatable_tokens()) - total_offset_;
}

double PrefillAdder::cur_rem_tokens() const {
  return static_cast<double>(memory_.allocatable_tokens()) - cur_offset_;
}

AddResult PrefillAdder::BudgetState() const {
  if (rem_total_tokens() <= 0 || cur_rem_tokens() <= 0) return AddResult::kNoToken;
  if (rem_input_ <= 0 || (rem_chunk_ && *rem_chunk_ <= 0)) return AddResult::kOther;
  return AddResult::kContinue;
}

void PrefillAdder::UpdateBudget(int64_t extend, int64_t reserved) {
  total_offset_ += static_cast<double>(extend + reserved);
  cur_offset_ += static_cast<double>(extend);
  rem_input_ -= extend;
  if (rem_chunk_) *rem_chunk_ -= extend;
}

void PrefillAdder::Plan(Sequence* seq, size_t prefix_len, size_t extend_len) {
  StepEntry entry;
  entry.seq = seq;
  entry.prefix_len = prefix_len;
  entry.extend_len = extend_len;
  entry.samples = prefix_len + extend_len == seq->fill_len();
  planned_.push_back(entry);
}

bool PrefillAdder::AddChunkedReq(Sequence* seq) {
  int64_t extend = static_cast<int64_t>(seq->fill_len() - seq->kv_len);
  double take = rem_total_tokens();
  if (rem_chunk_) take = std::min(take, static_cast<double>(*rem_chunk_));
  const bool truncated = static_cast<double>(extend) > take;
  if (truncated) extend = FloorPage(static_cast<int64_t>(take));
  if (extend <= 0) return false;
  Plan(seq, seq->kv_len, static_cast<size_t>(extend));
  UpdateBudget(CeilPage(extend), truncated ? 0 : ClippedNewTokens(*seq));
  if (truncated) new_chunked_ = seq;
  return true;
}

AddResult PrefillAdder::AddOneReq(Sequence* seq) {
  if (config_.prefill_max_requests &&
      static_cast<int64_t>(planned_.size()) >= *config_.prefill_max_requests) {
    return AddResult::kOther;
  }
  if (seq->ignore_eos && memory_.cache().disabled()) return AddOneReqIgnoreEos(seq);
  const size_t prefix_len = seq->match.matched_len();
  int64_t extend = static_cast<int64_t>(seq->fill_len() - prefix_len);
  const auto total = static_cast<double>(extend + ClippedNewTokens(*seq));
  if (total >= rem_total_tokens()) return AddResult::kNoToken;
  if (CeilPage(extend) >= rem_input_ && !planned_.empty()) return AddResult::kOther;

  // Locking moves the matched prefix out of "evictable": re-check the total budget.
  memory_.cache().IncLockRef(seq->match.last_node);
  if (total >= rem_total_tokens()) {
    memory_.cache().DecLockRef(seq->match.last_node);
    return AddResult::kNoToken;
  }

  if (!rem_chunk_ || CeilPage(extend) <= *rem_chunk_) {
    Plan(seq, prefix_len, static_cast<size_t>(extend));
    UpdateBudget(CeilPage(extend), ClippedNewTokens(*seq));
  } else {
    const int64_t trunc = FloorPage(*rem_chunk_);
    if (trunc <= 0) {
      memory_.cache().DecLockRef(seq->match.last_node);
      return AddResult::kOther;
    }
    extend = trunc;
    new_chunked_ = seq;
    Plan(seq, prefix_len, static_cast<size_t>(extend));
    UpdateBudget(extend, 0);
  }
  return BudgetState();
}

void PrefillAdder::AddReqState(const Sequence& seq, bool insert_sorted) {
  const double ratio = seq.ignore_eos ? 1.0 : new_token_ratio_;
  const double left =
      static_cast<double>(seq.max_new_tokens) * ratio - static_cast<double>(seq.output_ids.size());
  const auto occupied = static_cast<double>(seq.fill_len());
  if (left <= 0) return;
  auto& states = *req_states_;
  const std::pair<double, double> state(left, occupied);
  if (insert_sorted) {
    states.insert(std::upper_bound(states.begin(), states.end(), state), state);
  } else {
    states.push_back(state);
  }
}

AddResult PrefillAdder::AddOneReqIgnoreEos(Sequence* seq) {
  const auto extend = static_cast<int64_t>(seq->fill_len());
  if (static_cast<double>(CeilPage(extend)) > std::min(cur_rem_tokens(), rem_total_tokens())) {
    return AddResult::kNoToken;
  }
  if (!req_states_) {
    req_states_.emplace();
    AddReqState(*seq, false);
    for (const Sequence* r : running_) AddReqState(*r, false);
    for (const StepEntry& e : planned_) AddReqState(*e.seq, false);
    std::stable_sort(req_states_->begin(), req_states_->end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  } else {
    AddReqState(*seq, true);
  }
  const double cur_rem = cur_rem_tokens() - static_cast<double>(CeilPage(extend));
  double freed = 0;
  const auto& states = *req_states_;
  for (size_t i = 0; i < states.size(); ++i) {
    const auto bs = static_cast<double>(states.size() - i);
    const double min_free = cur_rem + freed - states[i].first * bs;
    if (min_free <= kIgnoreEosReserveTokens * bs) return AddResult::kNoToken;
    freed += states[i].second;
  }
  if (!rem_chunk_ || extend <= *rem_chunk_) {
    Plan(seq, 0, static_cast<size_t>(extend));
    UpdateBudget(CeilPage(extend), ClippedNewTokens(*seq));
  } else {
    if (*rem_chunk_ <= 0) return AddResult::kOther;
    new_chunked_ = seq;
    Plan(seq, 0, static_cast<size_t>(*rem_chunk_));
    UpdateBudget(*rem_chunk_, 0);
  }
  return BudgetState();
}

}  // namespace radixserve::sched

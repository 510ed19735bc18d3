// Scheduler's memory-pressure paths: decode retraction and priority preemption
// (reference/sglang-runtime.md 2.9 and 2.11).
#include <algorithm>

#include "common/log.h"
#include "sched/scheduler.h"

namespace radixserve::sched {

void Scheduler::RetractDecode(StepPlan& plan) {
  // Victims are popped from the back: fewest generated tokens first, then the longest prompt.
  std::vector<Sequence*> sorted = running_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Sequence* a, const Sequence* b) {
    if (a->output_ids.size() != b->output_ids.size()) {
      return a->output_ids.size() > b->output_ids.size();
    }
    return a->input_ids.size() < b->input_ids.size();
  });
  std::vector<Sequence*> retracted;
  bool first = true;
  while (first || !DecodeFits(sorted)) {
    if (sorted.size() == 1) break;
    first = false;
    Sequence* victim = sorted.back();
    sorted.pop_back();
    retracted.push_back(victim);
    ReleaseKv(victim, /*cache_kv=*/false);
    // Make room for the survivors' next few decode steps.
    const size_t want = sorted.size() * static_cast<size_t>(kRetractDecodeSteps);
    const size_t available = memory_->pool().available_size();
    if (want > available) memory_->cache().Evict(want - available);
  }
  int64_t decoded = 0;
  int64_t max_new = 0;
  for (const Sequence* seq : sorted) {
    decoded += static_cast<int64_t>(seq->output_ids.size());
    max_new += seq->max_new_tokens;
  }
  plan.ratio_before = new_token_ratio_;
  new_token_ratio_ = std::min(
      1.0,
      static_cast<double>(decoded + kRetractDecodeSteps * static_cast<int64_t>(sorted.size())) /
          static_cast<double>(max_new + 1));
  plan.ratio_after = new_token_ratio_;
  for (Sequence* seq : retracted) {
    Requeue(seq);
    plan.dropped.push_back({seq, DropReason::kRetracted});
  }
  num_retractions_ += static_cast<int64_t>(retracted.size());
  RADIX_LOG_INFO(
      "KV cache pool is full. Retract requests. #retracted_reqs: {}, #new_token_ratio: {:.4f} -> "
      "{:.4f}",
      retracted.size(), plan.ratio_before, plan.ratio_after);
}

size_t Scheduler::RetractAll() {
  const std::vector<Sequence*> moved = running_;
  for (Sequence* seq : moved) {
    ReleaseKv(seq, /*cache_kv=*/true);
    Requeue(seq);
  }
  num_retractions_ += static_cast<int64_t>(moved.size());
  return moved.size();
}

bool Scheduler::PreemptFor(const Sequence& seq, double tokens_needed, bool need_slot,
                           StepPlan& plan) {
  // Least important first; among equals the most recently queued first.
  std::vector<Sequence*> candidates = running_;
  std::stable_sort(candidates.begin(), candidates.end(), [&](const Sequence* a, const Sequence* b) {
    if (a->priority != b->priority) return config_.MoreImportant(b->priority, a->priority);
    return a->queue_order > b->queue_order;
  });
  std::vector<Sequence*> victims;
  double freed = 0.0;
  const int64_t clip = config_.NewTokensEstimateClip(memory_->token_usage());
  for (Sequence* running : candidates) {
    if ((need_slot && !victims.empty()) ||
        (!need_slot && freed >= tokens_needed && !victims.empty())) {
      break;
    }
    const int64_t diff = config_.schedule_low_priority_values_first
                             ? running->priority - seq.priority
                             : seq.priority - running->priority;
    if (diff <= config_.priority_preemption_threshold) break;
    victims.push_back(running);
    freed +=
        static_cast<double>(std::min(running->remaining_new_tokens(), clip)) * new_token_ratio_;
  }
  const bool enough = need_slot ? !victims.empty() : (!victims.empty() && freed >= tokens_needed);
  if (!enough) return false;
  for (Sequence* victim : victims) {
    Requeue(victim);
    plan.dropped.push_back({victim, DropReason::kPreempted});
  }
  return true;
}

}  // namespace radixserve::sched

// SchedulerConfig: the server arguments the scheduler reads, resolved to plain values (the engine
// maps ServerArgs onto it; tests fill it directly).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace radixserve::sched {

// SGLang's constants (environment-overridable there; fixed here).
inline constexpr int64_t kClipMaxNewTokensEstimation = 4096;
inline constexpr double kInitNewTokenRatio = 0.7;
inline constexpr double kMinNewTokenRatioFactor = 0.14;
inline constexpr int64_t kNewTokenRatioDecaySteps = 600;
inline constexpr int64_t kRetractDecodeSteps = 20;
inline constexpr double kIgnoreEosReserveTokens = 1.0;
inline constexpr size_t kLpmFallbackQueueLen = 128;
inline constexpr size_t kInBatchPrefixCheckThreshold = 32;
inline constexpr size_t kInBatchPrefixDeprioritizeThreshold = 32;

struct SchedulerConfig {
  std::string schedule_policy = "fcfs";  // fcfs | lpm | dfs-weight | lof | random
  int64_t max_running_requests = 1 << 20;
  int64_t max_prefill_tokens = 16384;
  std::optional<int64_t> chunked_prefill_size;  // nullopt: chunked prefill off
  // LightLLM's --disable_aggressive_schedule with --router_max_wait_tokens: while a batch runs,
  // waiting requests are prefilled only after this many decode steps since the last prefill
  // (0: at once, SGLang's and LightLLM's default). A chunked prefill in progress goes on.
  int64_t prefill_wait_decode_steps = 0;
  // RTP-LLM's --scheduler-reserve-resource-ratio when given: KV tokens admission keeps free as
  // headroom for the running requests (ignored while none runs, so any request that fits the
  // pool is admitted eventually).
  int64_t reserved_tokens = 0;
  // LightLLM's --router_token_ratio with --router_max_new_token_len: while the KV pool's usage
  // is below busy_token_ratio, admission (and preemption) estimates a request's remaining output
  // as at most idle_new_tokens_estimate tokens instead of SGLang's 4096, so more requests run
  // at once (at the price of retractions if they do generate more). 0: never (the default).
  double busy_token_ratio = 0.0;
  int64_t idle_new_tokens_estimate = kClipMaxNewTokensEstimation;
  std::optional<int64_t> prefill_max_requests;  // nullopt: unlimited
  std::optional<int64_t> max_queued_requests;   // nullopt: unlimited
  double schedule_conservativeness = 1.0;
  bool enable_mixed_chunk = false;
  bool enable_priority_scheduling = false;
  bool schedule_low_priority_values_first = false;
  int64_t priority_preemption_threshold = 10;
  uint64_t random_seed = 0;  // the random policy's shuffle
  // --max-loras-per-batch: distinct LoRA adapters among the running and newly admitted sequences
  // (the base model does not count); a waiting request that would exceed it waits.
  int64_t max_loras_per_batch = 8;

  double init_new_token_ratio() const {
    const double r = kInitNewTokenRatio * schedule_conservativeness;
    return r < 1.0 ? r : 1.0;
  }
  double min_new_token_ratio() const {
    const double r = init_new_token_ratio() * kMinNewTokenRatioFactor;
    return r < 1.0 ? r : 1.0;
  }
  double new_token_ratio_decay() const {
    return (init_new_token_ratio() - min_new_token_ratio()) /
           static_cast<double>(kNewTokenRatioDecaySteps);
  }
  // The most output tokens admission counts for one request at this KV usage (0..1).
  int64_t NewTokensEstimateClip(double token_usage) const {
    return token_usage < busy_token_ratio ? idle_new_tokens_estimate : kClipMaxNewTokensEstimation;
  }
  // "More important" under priority scheduling.
  bool MoreImportant(int64_t a, int64_t b) const {
    return schedule_low_priority_values_first ? a < b : a > b;
  }
};

}  // namespace radixserve::sched

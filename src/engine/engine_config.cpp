#include "engine/engine_config.h"

#include <algorithm>
#include <cstdlib>
#include <random>

namespace radixserve::engine {

std::optional<int64_t> OptionalIntArg(const args::ServerArgs& args, const char* key) {
  if (!args.values().contains(key) || args.IsNull(key)) return std::nullopt;
  return args.GetInt(key);
}

namespace {

std::optional<double> OptionalFloatArg(const args::ServerArgs& args, const char* key) {
  if (!args.values().contains(key) || args.IsNull(key)) return std::nullopt;
  return args.GetFloat(key);
}

bool BoolArg(const args::ServerArgs& args, const char* key) {
  return args.values().contains(key) && !args.IsNull(key) && args.GetBool(key);
}

}  // namespace

Expected<EngineConfig> MakeEngineConfig(const args::ServerArgs& args, int64_t context_len,
                                        int64_t max_total_tokens, int64_t max_running_requests) {
  EngineConfig config;
  config.context_len = context_len;
  config.max_total_tokens = max_total_tokens;
  sched::SchedulerConfig& s = config.sched;
  s.schedule_policy = args.GetString("schedule_policy");
  s.max_running_requests = max_running_requests;
  // As documented for --max-prefill-tokens: the budget is at least the context length.
  s.max_prefill_tokens =
      std::max(OptionalIntArg(args, "max_prefill_tokens").value_or(16384), context_len);
  if (auto chunk = OptionalIntArg(args, "chunked_prefill_size"); chunk && *chunk > 0) {
    s.chunked_prefill_size = chunk;
  }
  // LightLLM's --disable_chunked_prefill: every prompt is prefilled whole.
  if (BoolArg(args, "disable_chunked_prefill")) s.chunked_prefill_size.reset();
  s.prefill_max_requests = OptionalIntArg(args, "prefill_max_requests");
  s.max_queued_requests = OptionalIntArg(args, "max_queued_requests");
  if (s.max_queued_requests && *s.max_queued_requests < 1) {
    return InvalidArgument("--max-queued-requests must be at least 1");
  }
  s.schedule_conservativeness = args.GetFloat("schedule_conservativeness");
  s.enable_mixed_chunk = BoolArg(args, "enable_mixed_chunk");
  s.enable_priority_scheduling = BoolArg(args, "enable_priority_scheduling");
  s.schedule_low_priority_values_first = BoolArg(args, "schedule_low_priority_values_first");
  s.priority_preemption_threshold =
      OptionalIntArg(args, "priority_scheduling_preemption_threshold").value_or(10);
  s.max_loras_per_batch = OptionalIntArg(args, "max_loras_per_batch").value_or(8);

  config.stream_interval =
      std::max<int64_t>(1, OptionalIntArg(args, "stream_interval").value_or(1));
  config.decode_log_interval =
      std::max<int64_t>(1, OptionalIntArg(args, "decode_log_interval").value_or(40));
  config.num_continuous_decode_steps =
      std::max<int64_t>(1, OptionalIntArg(args, "num_continuous_decode_steps").value_or(1));
  config.allow_auto_truncate = BoolArg(args, "allow_auto_truncate");
  config.grammar_jump_forward = !BoolArg(args, "disable_grammar_jump_forward");
  if (args.values().contains("eos_id") && !args.IsNull("eos_id")) {
    for (const auto& id : args.Get("eos_id")) config.eos_override.push_back(id.get<int32_t>());
  }
  config.sleep_on_idle = BoolArg(args, "sleep_on_idle");
  config.deterministic_inference = BoolArg(args, "enable_deterministic_inference");
  config.enable_priority_scheduling = s.enable_priority_scheduling;
  config.abort_on_priority_when_disabled = BoolArg(args, "abort_on_priority_when_disabled");
  // SGLang draws a random seed in [0, 2^30] when --random-seed is unset.
  config.random_seed = static_cast<uint64_t>(
      OptionalIntArg(args, "random_seed")
          .value_or(static_cast<int64_t>(std::random_device{}() % ((1u << 30) + 1))));
  s.random_seed = config.random_seed;
  if (args.values().contains("speculative_algorithm") && !args.IsNull("speculative_algorithm")) {
    // Validation admits only NGRAM. SGLang's draft token count includes the verified last token.
    const int64_t tokens =
        OptionalIntArg(args, "speculative_num_draft_tokens").value_or(kDefaultNgramDraftTokens);
    config.spec_num_drafts = static_cast<size_t>(std::max<int64_t>(tokens - 1, 0));
    spec::NgramTableOptions& n = config.ngram;
    n.min_match_window =
        static_cast<size_t>(args.GetInt("speculative_ngram_min_match_window_size"));
    n.max_match_window =
        static_cast<size_t>(args.GetInt("speculative_ngram_max_match_window_size"));
    n.branch_length = static_cast<size_t>(args.GetInt("speculative_ngram_branch_length"));
    n.capacity = static_cast<size_t>(args.GetInt("speculative_ngram_capacity"));
    n.match_type = args.GetString("speculative_ngram_match_type") == "PROB"
                       ? spec::NgramMatchType::kProb
                       : spec::NgramMatchType::kBfs;
  }
  config.watchdog_timeout_s = OptionalFloatArg(args, "watchdog_timeout");
  config.soft_watchdog_timeout_s = OptionalFloatArg(args, "soft_watchdog_timeout");
  config.dp_size = static_cast<int32_t>(OptionalIntArg(args, "dp_size").value_or(1));
  if (const char* delay = std::getenv("RADIX_TEST_STEP_DELAY_MS")) {
    config.test_step_delay_ms = std::max<int64_t>(0, std::atoll(delay));
  }
  if (config.max_req_input_len() < 1) {
    return InvalidArgument("the context length and KV pool leave no room for a prompt");
  }
  return config;
}

}  // namespace radixserve::engine

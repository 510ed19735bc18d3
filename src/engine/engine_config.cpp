#include "engine/engine_config.h"

#include <algorithm>
#include <cstdlib>
#include <random>

#include "args/validate.h"

namespace radixserve::engine {

namespace {

namespace key = args::key;

// A flag or bool argument; unset (null, as a --config file may give it) reads as false.
bool BoolArg(const args::ServerArgs& args, args::ArgKey name) {
  return !args.IsNull(name) && args.GetBool(name);
}

}  // namespace

Expected<EngineConfig> MakeEngineConfig(const args::ServerArgs& args, int64_t context_len,
                                        int64_t max_total_tokens, int64_t max_running_requests) {
  EngineConfig config;
  config.context_len = context_len;
  config.max_total_tokens = max_total_tokens;
  sched::SchedulerConfig& s = config.sched;
  s.schedule_policy = args.GetString(key::kSchedulePolicy);
  s.max_running_requests = max_running_requests;
  // As documented for --max-prefill-tokens: the budget is at least the context length.
  s.max_prefill_tokens =
      std::max(args.GetOptionalInt(key::kMaxPrefillTokens).value_or(16384), context_len);
  if (auto chunk = args.GetOptionalInt(key::kChunkedPrefillSize); chunk && *chunk > 0) {
    s.chunked_prefill_size = chunk;
  }
  // LightLLM's --disable_chunked_prefill: every prompt is prefilled whole.
  if (BoolArg(args, key::kDisableChunkedPrefill)) s.chunked_prefill_size.reset();
  // RTP-LLM's --enable-fast-gen false, given: its prompts are prefilled whole too. (Its default
  // is false, but left out SGLang's chunking stays: SGLang launch lines never name it.)
  if (args.IsExplicit(key::kEnableFastGen) && !BoolArg(args, key::kEnableFastGen)) {
    s.chunked_prefill_size.reset();
  }
  s.prefill_max_requests = args.GetOptionalInt(key::kPrefillMaxRequests);
  s.max_queued_requests = args.GetOptionalInt(key::kMaxQueuedRequests);
  if (s.max_queued_requests && *s.max_queued_requests < 1) {
    return InvalidArgument("--max-queued-requests must be at least 1");
  }
  s.schedule_conservativeness = args.GetFloat(key::kScheduleConservativeness);
  s.enable_mixed_chunk = BoolArg(args, key::kEnableMixedChunk);
  s.enable_priority_scheduling = BoolArg(args, key::kEnablePriorityScheduling);
  s.schedule_low_priority_values_first = BoolArg(args, key::kScheduleLowPriorityValuesFirst);
  s.priority_preemption_threshold =
      args.GetOptionalInt(key::kPrioritySchedulingPreemptionThreshold).value_or(10);
  s.max_loras_per_batch = args.GetOptionalInt(key::kMaxLorasPerBatch).value_or(8);
  if (args.IsExplicit(key::kSchedulerReserveResourceRatio)) {
    s.reserved_tokens =
        max_total_tokens *
        std::clamp<int64_t>(args.GetInt(key::kSchedulerReserveResourceRatio), 0, 100) / 100;
  }
  if (args.IsExplicit(key::kRouterTokenRatio)) {
    s.busy_token_ratio = args.GetFloat(key::kRouterTokenRatio);
    s.idle_new_tokens_estimate =
        std::max<int64_t>(1, args.GetOptionalInt(key::kRouterMaxNewTokenLen).value_or(1024));
  }
  if (BoolArg(args, key::kDisableAggressiveSchedule)) {
    s.prefill_wait_decode_steps =
        std::max<int64_t>(0, args.GetOptionalInt(key::kRouterMaxWaitTokens).value_or(6));
  }

  config.stream_interval =
      std::max<int64_t>(1, args.GetOptionalInt(key::kStreamInterval).value_or(1));
  config.decode_log_interval =
      std::max<int64_t>(1, args.GetOptionalInt(key::kDecodeLogInterval).value_or(40));
  config.log_decode_stats = !BoolArg(args, key::kDisableLogStats);
  if (args.IsExplicit(key::kLogStatsInterval) && config.log_decode_stats) {
    config.throughput_log_interval_s = static_cast<double>(args.GetInt(key::kLogStatsInterval));
  }
  config.scheduler_recv_interval =
      std::max<int64_t>(1, args.GetOptionalInt(key::kSchedulerRecvInterval).value_or(1));
  config.show_time_cost = BoolArg(args, key::kShowTimeCost);
  // SGLang: the balancedness metrics record in stat mode unless a mode is given; the buffer
  // defaults to --eplb-rebalance-num-iterations.
  const bool expert_metrics = BoolArg(args, key::kEnableExpertDistributionMetrics);
  if (!args.IsNull(key::kExpertDistributionRecorderMode) || expert_metrics) {
    ExpertRecorderOptions recorder;
    const std::string mode =
        args.GetOptionalString(key::kExpertDistributionRecorderMode).value_or("stat");
    recorder.mode = ParseExpertRecordMode(mode).value_or(ExpertRecordMode::kStat);
    recorder.buffer_size = args.GetOptionalInt(key::kExpertDistributionRecorderBufferSize)
                               .value_or(args.GetInt(key::kEplbRebalanceNumIterations));
    recorder.log_balancedness = expert_metrics;
    recorder.ep_size = args.GetInt(key::kEpSize);
    config.expert_recorder = recorder;
  }
  config.log_request_time_stats = BoolArg(args, key::kEnableRequestTimeStatsLogging);
  config.num_continuous_decode_steps =
      std::max<int64_t>(1, args.GetOptionalInt(key::kNumContinuousDecodeSteps).value_or(1));
  config.nan_detection = BoolArg(args, key::kEnableNanDetection);
  config.crash_on_nan = BoolArg(args, key::kCrashOnNan);
  config.allow_auto_truncate = BoolArg(args, key::kAllowAutoTruncate);
  config.long_truncation_mode = args.GetOptionalString(key::kLongTruncationMode).value_or("");
  config.grammar_jump_forward = !BoolArg(args, key::kDisableGrammarJumpForward);
  if (!args.IsNull(key::kEosId)) {
    for (const auto& id : args.Get(key::kEosId)) config.eos_override.push_back(id.get<int32_t>());
  }
  config.sleep_on_idle = BoolArg(args, key::kSleepOnIdle);
  if (BoolArg(args, key::kFirstTokenConstraintMode)) {
    RADIX_ASSIGN_OR_RETURN(config.first_allowed_tokens, args::FirstAllowedTokens());
  }
  config.deterministic_inference = BoolArg(args, key::kEnableDeterministicInference);
  config.enable_priority_scheduling = s.enable_priority_scheduling;
  // SGLang draws a random seed in [0, 2^30] when --random-seed is unset.
  config.random_seed = static_cast<uint64_t>(
      args.GetOptionalInt(key::kRandomSeed)
          .value_or(static_cast<int64_t>(std::random_device{}() % ((1u << 30) + 1))));
  s.random_seed = config.random_seed;
  if (!args.IsNull(key::kSpeculativeAlgorithm)) {
    // Validation admits NGRAM and STANDALONE (and resolved STANDALONE's step count). SGLang's
    // draft token count includes the verified last token.
    const std::string algorithm = args.GetString(key::kSpeculativeAlgorithm);
    if (algorithm == "STANDALONE" || algorithm == "NEXTN") {
      config.spec_draft_model = true;
      config.spec_mtp = algorithm == "NEXTN";
      config.spec_num_drafts = static_cast<size_t>(args.GetInt(key::kSpeculativeNumSteps));
    } else {
      const int64_t tokens =
          args.GetOptionalInt(key::kSpeculativeNumDraftTokens).value_or(kDefaultNgramDraftTokens);
      config.spec_num_drafts = static_cast<size_t>(std::max<int64_t>(tokens - 1, 0));
    }
    config.spec_disable_batch =
        static_cast<size_t>(args.GetInt(key::kSpeculativeDisableByBatchSize));
    spec::NgramTableOptions& n = config.ngram;
    n.min_match_window = static_cast<size_t>(args.GetInt(key::kSpeculativeNgramMinMatchWindowSize));
    n.max_match_window = static_cast<size_t>(args.GetInt(key::kSpeculativeNgramMaxMatchWindowSize));
    n.branch_length = static_cast<size_t>(args.GetInt(key::kSpeculativeNgramBranchLength));
    n.capacity = static_cast<size_t>(args.GetInt(key::kSpeculativeNgramCapacity));
    n.match_type = args.GetString(key::kSpeculativeNgramMatchType) == "PROB"
                       ? spec::NgramMatchType::kProb
                       : spec::NgramMatchType::kBfs;
    n.min_bfs_breadth = static_cast<size_t>(args.GetInt(key::kSpeculativeNgramMinBfsBreadth));
    n.max_bfs_breadth = static_cast<size_t>(args.GetInt(key::kSpeculativeNgramMaxBfsBreadth));
    // (Pipeline parallelism, whose micro-batches would cut trees apart, refuses speculation.)
    const bool one_rank = args::ModelSplitRanks(args) == 1;
    config.spec_tree = !config.spec_draft_model &&
                       (args.GetOptionalInt(key::kPageSize).value_or(1) == 1 || one_rank);
  }
  config.watchdog_timeout_s = args.GetOptionalFloat(key::kWatchdogTimeout);
  config.soft_watchdog_timeout_s = args.GetOptionalFloat(key::kSoftWatchdogTimeout);
  config.dp_size = static_cast<int32_t>(args.GetOptionalInt(key::kDpSize).value_or(1));
  if (const char* delay = std::getenv("RADIX_TEST_STEP_DELAY_MS")) {
    config.test_step_delay_ms = std::max<int64_t>(0, std::atoll(delay));
  }
  if (config.max_req_input_len() < 1) {
    return InvalidArgument("the context length and KV pool leave no room for a prompt");
  }
  return config;
}

}  // namespace radixserve::engine

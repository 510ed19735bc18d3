// EngineConfig: the server arguments the engine loop reads, resolved once at startup from
// ServerArgs and the sized KV memory.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "args/server_args.h"
#include "common/status.h"
#include "engine/expert_recorder.h"
#include "sched/scheduler_config.h"
#include "spec/ngram_table.h"

namespace radixserve::engine {

// --speculative-num-draft-tokens when NGRAM is on and the argument is unset.
inline constexpr int64_t kDefaultNgramDraftTokens = 8;
// STANDALONE: sequences that draft in one step at most (the draft KV's scratch rows are this many
// times --speculative-num-steps); further ones decode without drafts that step.
inline constexpr size_t kMaxDraftingSequences = 64;

struct EngineConfig {
  // --expert-distribution-recorder-mode (or --enable-expert-distribution-metrics): the recorder's
  // mode, buffer and metrics (the model's sizes are filled in by the engine); nullopt: off.
  std::optional<ExpertRecorderOptions> expert_recorder;
  sched::SchedulerConfig sched;
  int64_t stream_interval = 1;
  int64_t decode_log_interval = 40;
  // LightLLM's --disable_log_stats: no periodic "Decode batch" statistics line (the figures are
  // still published to /server_info and the metrics).
  bool log_decode_stats = true;
  // LightLLM's --log_stats_interval when given: its three throughput lines (prompt + generated,
  // prompt, generated tokens/s) every this many seconds of serving; 0 is off.
  double throughput_log_interval_s = 0;
  int64_t num_continuous_decode_steps = 1;
  // --scheduler-recv-interval: while only decode steps run, the inbox (new requests, aborts,
  // commands) is drained every this many of them; after any other step, or idle, at once.
  int64_t scheduler_recv_interval = 1;
  // --show-time-cost: the cumulative time of each step stage (schedule, prefill, decode, mixed)
  // is logged whenever it grew by more than 0.1 s since its last line (SGLang's TimeInfo).
  bool show_time_cost = false;
  // --enable-request-time-stats-logging: SGLang's ReqTimeStats line for every finished request.
  bool log_request_time_stats = false;
  // --enable-nan-detection: every sampled (or scored) row's logits are checked before sampling;
  // a NaN logs one warning naming the request (a NaN logit is never chosen either way).
  bool nan_detection = false;
  // --crash-on-nan: such a NaN logs an error and aborts the process (as the watchdog does), so a
  // crash-dump handler runs and the server exits non-zero.
  bool crash_on_nan = false;
  bool allow_auto_truncate = false;
  // LightLLM's --long_truncation_mode: a prompt whose length plus max_new_tokens exceeds the
  // longest request (max_req_len) loses tokens from its start ("head") or its middle ("center")
  // to fit; empty: such a request is handled as SGLang does (refused, or cut by
  // --allow-auto-truncate).
  std::string long_truncation_mode;
  bool sleep_on_idle = false;
  bool deterministic_inference = false;
  bool enable_priority_scheduling = false;
  bool abort_on_priority_when_disabled = false;
  uint64_t random_seed = 0;
  // Jump-forward: append the tokens a grammar forces without sampling them
  // (!--disable-grammar-jump-forward).
  bool grammar_jump_forward = true;
  // LightLLM's --eos_id: the token ids that end generation, replacing the model's when not empty.
  std::vector<int32_t> eos_override;
  // LightLLM's --first_token_constraint_mode: the first generated token of every request is one
  // of these ids (the FIRST_ALLOWED_TOKENS environment variable); empty: no constraint.
  std::vector<int32_t> first_allowed_tokens;
  // Speculative decoding: draft tokens proposed per decode step of an eligible sequence
  // (NGRAM: --speculative-num-draft-tokens - 1; STANDALONE: --speculative-num-steps); 0 is off.
  size_t spec_num_drafts = 0;
  // STANDALONE: a draft model proposes (engine_factory passes it); else the n-gram table.
  bool spec_draft_model = false;
  // NEXTN: that draft model is the target, drafting with its multi-token-prediction block.
  bool spec_mtp = false;
  // --speculative-disable-by-batch-size: no drafts while this many sequences decode (0: none).
  size_t spec_disable_batch = 0;
  spec::NgramTableOptions ngram;  // the --speculative-ngram-* arguments
  // NGRAM drafts trees (NgramTable::Tree) rather than chains. Accepting a branch moves its K/V
  // next to the sequence's end: by swapping slots with pages of one slot, else by copying K/V
  // rows, which only this process's pool can do (no tensor-parallel peers).
  bool spec_tree = false;
  // Watchdog (--watchdog-timeout, --soft-watchdog-timeout), seconds; nullopt: off.
  std::optional<double> watchdog_timeout_s;
  std::optional<double> soft_watchdog_timeout_s;
  // Data parallelism: this replica's rank and the number of replicas (--dp-size).
  int32_t dp_rank = 0;
  int32_t dp_size = 1;
  // Test hook: every model step first sleeps this long (environment variable
  // RADIX_TEST_STEP_DELAY_MS, read once at startup; 0 outside tests).
  int64_t test_step_delay_ms = 0;
  // Limits (SGLang): max_req_len = min(context_len - 1, max_total_tokens - 1);
  // max_req_input_len = max_req_len - 5.
  int64_t context_len = 0;
  int64_t max_total_tokens = 0;
  int64_t max_req_len() const { return std::min(context_len - 1, max_total_tokens - 1); }
  int64_t max_req_input_len() const { return max_req_len() - 5; }
};

// Reads every scheduler / engine argument. context_len, max_total_tokens and max_running_requests
// come from the model and the KV memory, the rest from `args`.
Expected<EngineConfig> MakeEngineConfig(const args::ServerArgs& args, int64_t context_len,
                                        int64_t max_total_tokens, int64_t max_running_requests);

}  // namespace radixserve::engine

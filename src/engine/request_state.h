// RequestState: the engine's output side of one request: the request as submitted, its sink, the
// grammar matcher of a constrained request, the incremental detokenizer, the stop-string and
// stop-regex matchers, the finish decision and the event being accumulated between two emissions
// (stream cadence, reference/sglang-runtime.md 1.3: a streaming request emits at output lengths
// 1, k+1, 2k+1, ... for stream interval k; a non-streaming one only its final event; text that may
// still become a stop string, or part of a stop_regex match, is held back).
//
// Thread affinity: engine thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/sequence_grammar.h"
#include "sampling/finish_check.h"
#include "sampling/sampler.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/stop_regex_matcher.h"
#include "tokenizer/stop_string_matcher.h"

namespace radixserve::engine {

// The logprob entry of `token` from the sampler's output for its row.
TokenLogprobInfo MakeLogprobInfo(int32_t token, const sampling::SampleOutput& sample);

class RequestState {
 public:
  RequestState(GenerateRequest request, EventSink sink, const tokenizer::Tokenizer* tokenizer,
               uint64_t seed, int64_t stream_interval);

  const GenerateRequest& request() const { return request_; }
  uint64_t seed() const { return seed_; }
  bool finished() const { return finished_; }
  bool needs_input_logprobs() const {
    return request_.return_logprob && request_.logprob_start_len >= 0 && !input_logprobs_sent_;
  }

  // Prompt logprob of position `pos` (entry for token pos, scored from the logits at pos - 1).
  void AddInputLogprob(size_t pos, TokenLogprobInfo info);

  // return_hidden_states: the final hidden state after feeding fill position `pos`. Positions
  // already emitted (recomputed after a retraction) are ignored.
  void AddHiddenRow(size_t pos, std::span<const float> row);
  // return_logits: the raw logits row output token number `output_len` (1-based) is drawn from.
  void RecordLogits(std::span<const float> row, int64_t output_len);

  // The grammar state of a constrained request (null when unconstrained).
  SequenceGrammar* grammar() { return grammar_ ? &*grammar_ : nullptr; }
  bool constrained() const { return grammar_.has_value(); }

  // Appends one output token (already accepted by grammar(), if any): runs the finish checks,
  // detokenizes, matches stop strings and stop regexes and emits an event when the cadence (or
  // the finish) says so. `emit` false holds a progress event back (more tokens of the same step
  // follow: jump-forward); the final event is always emitted. Returns true when finished.
  bool OnToken(int32_t token, const sampling::SampleOutput& sample, int64_t output_len,
               std::span<const int32_t> eos_ids, int64_t vocab_size, int64_t cached_tokens,
               bool emit = true);

  // Speculative decoding: the request's events carry spec_verify_ct from now on.
  void EnableSpecCount() { spec_verify_ct_ = 0; }
  void CountSpecVerify() {
    if (spec_verify_ct_) ++*spec_verify_ct_;
  }
  // Output tokens already recorded into the n-gram table (the fill ids before this position).
  // Drafts to propose next step (0: the server's maximum); VerifyEntry adapts it.
  size_t draft_budget() const { return draft_budget_; }
  void set_draft_budget(size_t n) { draft_budget_ = n; }
  size_t ngram_recorded() const { return ngram_recorded_; }
  void set_ngram_recorded(size_t len) { ngram_recorded_ = len; }

  // Ends the request with an abort (or another given reason) and emits the final event.
  void Finish(FinishReason reason, int64_t output_len, int64_t cached_tokens);
  // With the hierarchical cache's storage tier: how many of the cached prompt tokens came from
  // storage (events then carry the cache-source breakdown).
  void set_storage_cached_tokens(int64_t tokens) { storage_cached_tokens_ = tokens; }
  // --enable-request-time-stats-logging: log SGLang's ReqTimeStats line when the request ends
  // (with the loop's log prefix).
  void EnableTimeStatsLog(std::string prefix) { time_stats_prefix_ = std::move(prefix); }
  // The request's first step began (SGLang's forward entry: the end of its queueing).
  void MarkForwardEntry() {
    if (!forward_entry_) forward_entry_ = std::chrono::steady_clock::now();
  }
  // GenerateRequest::export_kv: the prompt's K/V rows, for the final event.
  void set_kv_rows(std::shared_ptr<const kv::KvRows> rows) { kv_rows_ = std::move(rows); }

 private:
  void Emit(bool final, int64_t output_len, int64_t cached_tokens);
  void LogTimeStats(int64_t output_len, int64_t cached_tokens) const;
  // Detokenized text of one step: applies stop strings and stop regexes and moves what may be
  // released into the pending event (everything when `finishing`).
  void AddText(std::string_view delta, bool finishing);

  GenerateRequest request_;
  EventSink sink_;
  uint64_t seed_;
  int64_t stream_interval_;
  std::unique_ptr<tokenizer::IncrementalDetokenizer> detokenizer_;
  std::unique_ptr<tokenizer::StopStringMatcher> stop_matcher_;
  std::unique_ptr<tokenizer::StopRegexMatcher> stop_regex_;  // null without stop_regex
  std::optional<SequenceGrammar> grammar_;
  std::string text_;            // all detokenized output text (before stop trimming)
  size_t text_released_ = 0;    // bytes of text_ moved into events
  size_t string_safe_end_ = 0;  // bytes of text_ the stop-string matcher has released
  bool text_stopped_ = false;   // a stop string or stop regex matched: no more text
  int64_t last_emit_len_ = 0;   // output length at the last progress event
  bool finished_ = false;
  int64_t storage_cached_tokens_ = -1;  // -1: no storage tier
  std::shared_ptr<const kv::KvRows> kv_rows_;
  std::optional<std::string> time_stats_prefix_;
  std::optional<std::chrono::steady_clock::time_point> forward_entry_;
  bool input_logprobs_sent_ = false;
  size_t input_logprob_start_ = 0;
  RequestEvent pending_;
  // return_hidden_states: rows of positions hidden_sent_, hidden_sent_ + 1, ... computed so far
  // (an empty row: not computed yet).
  std::vector<std::vector<float>> hidden_;
  size_t hidden_sent_ = 0;
  // return_logits with logits_index: the row of that output token, for the final event.
  std::vector<float> indexed_logits_;
  std::optional<FinishReason> finish_;
  std::optional<int64_t> spec_verify_ct_;
  size_t ngram_recorded_ = 0;
  size_t draft_budget_ = 0;
};

}  // namespace radixserve::engine

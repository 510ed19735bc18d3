// SequenceGrammar: the grammar state of one constrained sequence on the engine thread -- a
// GrammarMatcher (from the request's CompiledGrammar) and the output tokens it has consumed.
//
// Per step, for the sequence's sampling row (prefill or decode, greedy or sampled, any batch):
//   FillMask(seq.output_ids, mask)  -> the row's allowed tokens, before logits processing
//   sample a token (LogitsProcessor masks the row, the sampler draws)
//   Accept(token)                   -> advances the matcher; then terminated() is the grammar's
//                                      finish check (between max_new_tokens and EOS, as SGLang)
// FillMask first re-derives the matcher state from the output ids when they are not what the
// matcher consumed (a retracted or preempted sequence keeps its output ids today, but the matcher
// must never silently drift from them): it rolls back to the common prefix and accepts the rest,
// or resets and replays everything.
//
// With jump-forward, after Accept(sampled) the engine appends ForcedTokens() (accepting each) to
// the output without sampling them; the next decode step computes their K/V with the last token.
//
// With a start token (a reasoning model's end of thinking), the grammar applies only to the
// output after that token's first occurrence: before it every token is allowed and nothing is
// forced or terminated; the matcher sees the output from just after it.
//
// Errors are kInvalidArgument values with llguidance's explanation; the engine ends the request
// with an abort carrying the message. Thread affinity: engine thread only (one per sequence).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/status.h"
#include "sampling/compiled_grammar.h"
#include "sampling/grammar_matcher.h"

namespace radixserve::engine {

class SequenceGrammar {
 public:
  explicit SequenceGrammar(const sampling::CompiledGrammar& grammar,
                           std::optional<int32_t> start_token = std::nullopt);

  // The mask for the token after `output_ids`; mask.size() == bitmask_words(). Fails when the
  // grammar is in an error state or allows no token at all.
  Status FillMask(std::span<const int32_t> output_ids, std::span<uint32_t> mask);
  // Consumes the sampled token (fails if the mask did not allow it).
  Status Accept(int32_t token);
  // Jump-forward: the tokens the grammar forces next (the canonical tokenization of the forced
  // text), at most `max_tokens`; empty when the next token is the model's choice (or on an error,
  // which the next FillMask reports). Does not advance the matcher: Accept each one.
  std::vector<int32_t> ForcedTokens(size_t max_tokens);
  // Nothing but EOS may follow (or EOS was accepted): the request finishes.
  bool terminated() const { return active() && matcher_.IsTerminated(); }

  size_t bitmask_words() const { return matcher_.bitmask_words(); }
  // How many times the matcher was re-derived from the output ids (tests, logs).
  int64_t resyncs() const { return resyncs_; }

 private:
  Status Resync(std::span<const int32_t> output_ids);
  bool active() const { return !start_token_ || started_; }

  sampling::GrammarMatcher matcher_;
  std::optional<int32_t> start_token_;
  bool started_ = false;           // the start token was accepted (or found in the output)
  std::vector<int32_t> accepted_;  // tokens the matcher consumed, in order
  int64_t resyncs_ = 0;
};

}  // namespace radixserve::engine

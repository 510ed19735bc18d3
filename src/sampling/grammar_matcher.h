// GrammarMatcher: the grammar state of one sequence (llguidance's LlgMatcher): which tokens may
// come next, advanced by each token the sequence commits. Made by CompiledGrammar::NewMatcher.
//
// Token bitmask: bitmask_words() uint32 words; token t is allowed iff
//   (bitmask[t / 32] >> (t % 32)) & 1.
// EOS ids are allowed exactly when the grammar accepts the text so far; once the grammar is
// terminated (nothing but EOS can follow) the mask holds only the EOS ids.
//
// How the engine uses it (engine/sequence_grammar.h holds one per constrained sequence):
//   * Ownership and threads: one matcher per sequence (n > 1: one per sample). Not thread-safe;
//     distinct matchers are independent, so the rows of a batch may be filled on worker threads
//     in parallel. Compile and NewMatcher happen off the engine thread (GrammarCompiler); the
//     request reaches the scheduler with its matcher ready.
//   * Each decode step, for each constrained row, before sampling:
//       matcher.FillNextTokenBitmask(row_bitmask);           // tens of us, see Cost below
//       context.allowed_tokens = row_bitmask;                // LogitsRowContext
//     LogitsProcessor::ProcessRow then sets every disallowed logit to -inf (after penalties and
//     min_new_tokens, before logit_bias, as SGLang orders it), so greedy, sampled, n > 1,
//     logprob and streaming rows all see the masked distribution. Unconstrained rows leave
//     allowed_tokens empty. The mask depends only on tokens already accepted, so it may be
//     computed while the forward pass for the same step runs.
//     Prefill/extend rows sample too: fill the mask before their first token the same way.
//   * After sampling token t for the row: AcceptToken(t) (a few us). It fails only if t was not
//     allowed (e.g. min_new_tokens masked EOS while the grammar allowed nothing else, so every
//     logit was -inf): finish the request with an error event (an abort with status 400). Then,
//     between the max_new_tokens check and the EOS / stop-token check (finish_check.h),
//     IsTerminated() finishes the request with a stop reason, as SGLang's Req.check_finished does
//     with grammar.is_terminated(). A sampled EOS is accepted like any token (allowed only while
//     accepting).
//   * Jump-forward (later): after AcceptToken, ForcedTokens() lists tokens the grammar forces;
//     AcceptTokens(forced) and append them to the sequence without sampling.
//   * Retraction keeps the matcher (it is CPU state of the request, not KV); SequenceGrammar
//     still checks it against the sequence's output ids before each mask and replays on drift.
//     Dropping accepted tokens (speculative decoding rejections) uses Rollback(n); Reset() returns
//     to the start.
//   * Cost, one core, SmolLM2's 49,152-token vocabulary (bench/cpp/grammar_mask_bench.cpp, on a
//     shared, loaded machine): JSON schema, a schema-valid document fed token by token:
//     FillNextTokenBitmask p50 19 us, mean 64 us, p99 0.45 ms, max 5 ms; AcceptToken p50 2 us,
//     p99 30 us; regex similar. Structural tags (free text, nearly every token allowed) cost
//     more: mean 0.3 ms, p99 5 ms. llguidance publishes mean ~50 us, p99 ~0.5 ms for a 128k
//     vocabulary on JSONSchemaBench. NewMatcher ~20 us.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

struct LlgMatcher;

namespace radixserve::sampling {

class GrammarMatcher {
 public:
  // Takes ownership of `matcher` (from llguidance). Use CompiledGrammar::NewMatcher. A
  // moved-from matcher may only be destroyed or assigned to.
  GrammarMatcher(LlgMatcher* matcher, size_t bitmask_words);
  ~GrammarMatcher();
  GrammarMatcher(GrammarMatcher&& other) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&& other) noexcept;
  GrammarMatcher(const GrammarMatcher&) = delete;
  GrammarMatcher& operator=(const GrammarMatcher&) = delete;

  // Writes the mask for the next token. bitmask.size() must equal bitmask_words(). Fails if the
  // matcher is in an error state (the mask is then all zero).
  Status FillNextTokenBitmask(std::span<uint32_t> bitmask);

  // Advances by one committed token. A token the mask did not allow is an error that leaves the
  // matcher in an error state for good (kInvalidArgument with llguidance's explanation).
  Status AcceptToken(int32_t token);
  Status AcceptTokens(std::span<const int32_t> tokens);

  // Number of leading `tokens` the matcher would accept, without changing its state.
  Expected<size_t> ValidateTokens(std::span<const int32_t> tokens);

  // Undoes the last `num_tokens` accepted tokens (llguidance keeps the whole history).
  Status Rollback(size_t num_tokens);
  // Back to the start of the grammar (fails in an error state).
  Status Reset();

  // Tokens the grammar forces from here (canonical tokenization of the forced bytes), at most
  // `max_tokens`; empty when the next token is not forced.
  Expected<std::vector<int32_t>> ForcedTokens(size_t max_tokens = 64);

  // The text so far is a complete match (EOS would be allowed now).
  bool IsAccepting();
  // No token but EOS can follow (the grammar is complete and cannot be extended), EOS has been
  // accepted, or the matcher is in an error state. The request should finish.
  bool IsTerminated() const;
  bool IsError() const;
  // llguidance's message when IsError(), else empty.
  std::string error() const;

  size_t bitmask_words() const { return bitmask_words_; }

 private:
  Status LastError(const std::string& what) const;

  LlgMatcher* matcher_ = nullptr;
  size_t bitmask_words_ = 0;
};

}  // namespace radixserve::sampling

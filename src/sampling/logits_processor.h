// LogitsProcessor: turns a row of model logits into the row the sampler draws from. It never
// picks a token (that is Sampler's job). Order, as SGLang applies it (reference §4.4), with the
// repetition penalty (which SGLang 0.5.x validates but ignores) placed before the additive ones
// as vLLM does:
//   1. penalties over the sequence's own *output* tokens (prompt tokens never count), for each
//      distinct output token t with count c:
//        repetition: logit = logit > 0 ? logit / rp : logit * rp   (rp == 1 or rp == 0: no-op)
//        frequency:  logit -= frequency_penalty * c
//        presence:   logit -= presence_penalty
//   2. min_new_tokens: while #output < min_new_tokens, logits of stop_token_ids and of the EOS
//      ids the caller passes become -inf (stop strings may still end generation).
//   3. grammar mask: tokens whose bit in the row's allowed_tokens bitmask (token_bitmask.h) is
//      clear become -inf; an empty bitmask means an unconstrained row.
//   4. logit_bias: logit[t] += bias (if two keys name one token, "7" and "07", the last wins).
// Temperature is applied by the Sampler, which owns the distribution it samples from.
// Thread affinity: one instance per engine thread (it keeps scratch buffers; not thread-safe).
// No heap allocation after construction.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampling_params.h"

namespace radixserve::sampling {

// What the processor needs to know about one row (one sequence at this decode step).
struct LogitsRowContext {
  const SamplingParams* params = nullptr;  // verified params; must outlive the call
  std::span<const int32_t> output_ids;     // tokens this sequence generated so far
  // Model config eos ids ∪ tokenizer eos ∪ tokenizer additional stop ids (any order).
  std::span<const int32_t> eos_token_ids;
  // The row's grammar mask from GrammarMatcher::FillNextTokenBitmask; empty: unconstrained.
  std::span<const uint32_t> allowed_tokens;
};

class LogitsProcessor {
 public:
  explicit LogitsProcessor(int32_t vocab_size);

  // Processes one row in place. logits.size() == vocab_size; token ids in `row` outside
  // [0, vocab_size) are ignored.
  void ProcessRow(std::span<float> logits, const LogitsRowContext& row);

  // Row-major [rows.size(), vocab_size] batch; each row uses its own params.
  void ProcessBatch(std::span<float> logits, std::span<const LogitsRowContext> rows);

  int32_t vocab_size() const { return vocab_size_; }

 private:
  void ApplyPenalties(std::span<float> logits, const SamplingParams& params,
                      std::span<const int32_t> output_ids);

  int32_t vocab_size_;
  std::vector<uint32_t> counts_;  // per-token output counts; all zero between calls
};

}  // namespace radixserve::sampling

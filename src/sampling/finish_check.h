// CheckTokenFinish: the token-level finish decision after a token is appended to a sequence, as
// SGLang orders it (reference §4.5). Pure function; any thread.
//   1. #output >= max_new_tokens          -> length  (before EOS: an EOS on the last allowed
//                                                     step reports "length")
//   2. unless ignore_eos: token in stop_token_ids ∪ eos ids -> stop, matched = token id
//   3. token outside [0, vocab_size)      -> stop, matched = "NaN happened"
// Not here: pending aborts (engine), grammar termination (grammar matcher, between 1 and 2),
// stop strings and stop_regex (the tokenizer's stop matcher, after 3).
// min_new_tokens never blocks a finish here: LogitsProcessor masks stop ids instead.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "sampling/finish_reason.h"
#include "sampling/sampling_params.h"

namespace radixserve::sampling {

// nullopt: the request goes on. Otherwise kLength (length = max_new_tokens), or kStop with
// matched_token (a stop / EOS id) or matched_str ("NaN happened").
// output_len counts generated tokens including `token`. eos_token_ids: model config eos ids ∪
// tokenizer eos ∪ tokenizer additional stop ids, any order.
std::optional<FinishReason> CheckTokenFinish(const SamplingParams& params, int64_t output_len,
                                             int32_t token, std::span<const int32_t> eos_token_ids,
                                             int64_t vocab_size);

}  // namespace radixserve::sampling

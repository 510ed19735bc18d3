#include "sampling/finish_check.h"

#include <algorithm>

namespace radixserve::sampling {

std::optional<FinishReason> CheckTokenFinish(const SamplingParams& params, int64_t output_len,
                                             int32_t token, std::span<const int32_t> eos_token_ids,
                                             int64_t vocab_size) {
  if (params.max_new_tokens && output_len >= *params.max_new_tokens) {
    return LengthFinish(*params.max_new_tokens);
  }
  if (!params.ignore_eos) {
    const bool is_stop_id =
        std::binary_search(params.stop_token_ids.begin(), params.stop_token_ids.end(), token);
    const bool is_eos =
        std::find(eos_token_ids.begin(), eos_token_ids.end(), token) != eos_token_ids.end();
    if (is_stop_id || is_eos) return StopTokenFinish(token);
  }
  if (token < 0 || token >= vocab_size) return StopTextFinish("NaN happened");
  return std::nullopt;
}

}  // namespace radixserve::sampling

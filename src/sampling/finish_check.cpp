#include "sampling/finish_check.h"

#include <algorithm>

namespace radixserve::sampling {

TokenFinish CheckTokenFinish(const SamplingParams& params, int64_t output_len, int32_t token,
                             std::span<const int32_t> eos_token_ids, int64_t vocab_size) {
  TokenFinish finish;
  if (params.max_new_tokens && output_len >= *params.max_new_tokens) {
    finish.kind = FinishKind::kLength;
    finish.length = *params.max_new_tokens;
    return finish;
  }
  if (!params.ignore_eos) {
    const bool is_stop_id =
        std::binary_search(params.stop_token_ids.begin(), params.stop_token_ids.end(), token);
    const bool is_eos =
        std::find(eos_token_ids.begin(), eos_token_ids.end(), token) != eos_token_ids.end();
    if (is_stop_id || is_eos) {
      finish.kind = FinishKind::kStopToken;
      finish.matched_token = token;
      return finish;
    }
  }
  if (token < 0 || token >= vocab_size) {
    finish.kind = FinishKind::kStopText;
    finish.matched_text = "NaN happened";
  }
  return finish;
}

}  // namespace radixserve::sampling

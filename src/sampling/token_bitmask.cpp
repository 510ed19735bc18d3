#include "sampling/token_bitmask.h"

#include <algorithm>
#include <limits>

namespace radixserve::sampling {

void ApplyTokenBitmask(std::span<const uint32_t> bitmask, std::span<float> logits) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t covered = std::min(logits.size(), bitmask.size() * 32);
  for (size_t word = 0; word * 32 < covered; ++word) {
    const uint32_t bits = bitmask[word];
    if (bits == 0xFFFFFFFFu) continue;
    const size_t end = std::min(covered, word * 32 + 32);
    for (size_t t = word * 32; t < end; ++t) {
      if (((bits >> (t % 32)) & 1u) == 0) logits[t] = kNegInf;
    }
  }
  std::fill(logits.begin() + static_cast<std::ptrdiff_t>(covered), logits.end(), kNegInf);
}

}  // namespace radixserve::sampling

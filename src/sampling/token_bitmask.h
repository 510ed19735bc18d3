// Token bitmasks: one bit per vocabulary id, packed into uint32 words (llguidance's and
// xgrammar's layout): token t is allowed iff (bitmask[t / 32] >> (t % 32)) & 1. GrammarMatcher
// fills them; LogitsProcessor applies them. Pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace radixserve::sampling {

// Words needed for `vocab_size` tokens.
constexpr size_t TokenBitmaskWords(size_t vocab_size) { return (vocab_size + 31) / 32; }

inline bool IsTokenAllowed(std::span<const uint32_t> bitmask, int32_t token) {
  const auto t = static_cast<size_t>(token);
  return token >= 0 && t / 32 < bitmask.size() && ((bitmask[t / 32] >> (t % 32)) & 1u) != 0;
}

// Sets logits[t] = -inf for every token t whose bit is clear. Tokens past the mask (logits wider
// than bitmask.size() * 32) are disallowed too.
void ApplyTokenBitmask(std::span<const uint32_t> bitmask, std::span<float> logits);

}  // namespace radixserve::sampling

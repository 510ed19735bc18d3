// ApplyTokenBitmask and IsTokenAllowed on hand-built masks.
#include "sampling/token_bitmask.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace radixserve::sampling {
namespace {

TEST(TokenBitmaskTest, ClearBitsBecomeMinusInfinity) {
  // 40 tokens: allow 0, 3, 31, 32 and 39.
  std::vector<uint32_t> mask(TokenBitmaskWords(40), 0);
  ASSERT_EQ(mask.size(), 2u);
  for (int t : {0, 3, 31, 32, 39}) mask[t / 32] |= 1u << (t % 32);
  std::vector<float> logits(40);
  for (int t = 0; t < 40; ++t) logits[t] = static_cast<float>(t);
  ApplyTokenBitmask(mask, logits);
  for (int t = 0; t < 40; ++t) {
    const bool allowed = t == 0 || t == 3 || t == 31 || t == 32 || t == 39;
    EXPECT_EQ(IsTokenAllowed(mask, t), allowed) << t;
    if (allowed) {
      EXPECT_EQ(logits[t], static_cast<float>(t));
    } else {
      EXPECT_TRUE(std::isinf(logits[t]) && logits[t] < 0) << t;
    }
  }
  EXPECT_FALSE(IsTokenAllowed(mask, -1));
  EXPECT_FALSE(IsTokenAllowed(mask, 64));
}

TEST(TokenBitmaskTest, LogitsPastTheMaskAreDisallowed) {
  const std::vector<uint32_t> mask = {0xFFFFFFFFu};
  std::vector<float> logits(40, 1.0f);
  ApplyTokenBitmask(mask, logits);
  for (int t = 0; t < 32; ++t) EXPECT_EQ(logits[t], 1.0f);
  for (int t = 32; t < 40; ++t) EXPECT_TRUE(std::isinf(logits[t]));
}

}  // namespace
}  // namespace radixserve::sampling

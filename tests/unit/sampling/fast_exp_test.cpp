// FastExp against libm's double-precision exp (the reference).
#include "sampling/fast_exp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace radixserve::sampling {
namespace {

TEST(FastExpTest, RelativeErrorWithinAFewUlp) {
  double worst = 0.0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 200000.0f;
    const double reference = std::exp(static_cast<double>(x));
    const double rel = std::fabs(static_cast<double>(FastExp(x)) - reference) / reference;
    worst = std::max(worst, rel);
  }
  EXPECT_LT(worst, 4.0 * std::numeric_limits<float>::epsilon()) << worst;
}

TEST(FastExpTest, EdgeValues) {
  EXPECT_EQ(FastExp(0.0f), 1.0f);
  EXPECT_EQ(FastExp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(FastExp(-100.0f), 0.0f);
  EXPECT_EQ(FastExp(std::numeric_limits<float>::lowest()), 0.0f);
  EXPECT_TRUE(std::isfinite(FastExp(1000.0f)));
}

}  // namespace
}  // namespace radixserve::sampling

#include "kernels/gelu_f16_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/half.h"

namespace radixserve::kernels {
namespace {

float RoundF16(float x) { return F16ToF32(F32ToF16(x)); }

// The f32 tanh-GELU formula, evaluated in double: the table must equal it rounded to f16
// (input and output), up to one f16 step where f32 evaluation sits on a rounding boundary.
double GeluDouble(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)));
}

TEST(GeluF16TableTest, TableIsTheF16RoundedFormula) {
  for (float x = -9.99f; x < 9.99f; x += 0.0137f) {
    const float want = RoundF16(static_cast<float>(GeluDouble(RoundF16(x))));
    const float got = GeluTanhF16(x);
    // Far in the negative tail, f32 loses 1 + tanh(..) to cancellation: a few f16 subnormal steps.
    EXPECT_NEAR(got, want, std::fabs(want) * 1e-3 + 3e-7) << x;
    EXPECT_EQ(got, RoundF16(got)) << "table values are f16";
  }
}

TEST(GeluF16TableTest, OutsideTheTableRange) {
  EXPECT_EQ(GeluTanhF16(-10.0f), 0.0f);
  EXPECT_EQ(GeluTanhF16(-1e6f), 0.0f);
  EXPECT_EQ(GeluTanhF16(10.0f), 10.0f);
  EXPECT_EQ(GeluTanhF16(123.25f), 123.25f);
}

TEST(GeluF16TableTest, VectorPathEqualsScalarPath) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-14.0f, 14.0f);
  for (int64_t n : {1, 15, 16, 17, 100, 2048}) {
    std::vector<float> gate(static_cast<size_t>(n)), up(static_cast<size_t>(n)), out(gate.size());
    for (auto& v : gate) v = dist(rng);
    for (auto& v : up) v = dist(rng);
    gate[0] = -10.0f;
    if (n > 1) gate[1] = 10.0f;
    if (n > 2) gate[2] = std::numeric_limits<float>::quiet_NaN();
    GeluTanhF16TableMul(gate.data(), up.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float want = GeluTanhF16(gate[i]) * up[i];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(out[i])) << i;
      } else {
        EXPECT_EQ(out[i], want) << "n=" << n << " i=" << i << " x=" << gate[i];
      }
    }
  }
}

}  // namespace
}  // namespace radixserve::kernels

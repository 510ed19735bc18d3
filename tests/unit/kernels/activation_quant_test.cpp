// RoundActivations: the llama.cpp-style Q8_0 / Q8_1 / Q8_K round trips land on their grids, keep
// the block maximum, and MatMul in kGgmlRounded mode stays close to the exact product.
#include "kernels/ref/activation_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/half.h"
#include "kernels/matmul.h"

namespace radixserve::kernels {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(ActivationQuantTest, Q8_0GridAndMaximum) {
  auto x = Random(64, 1);
  std::vector<float> out(64);
  ref::RoundActivations(WeightFormat::kQ4_0, x.data(), out.data(), 64);
  for (int b = 0; b < 2; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    const float d16 = F16ToF32(F32ToF16(amax / 127.0f));
    for (int i = 0; i < 32; ++i) {
      const float q = out[b * 32 + i] / d16;
      EXPECT_NEAR(q, std::round(q), 1e-4) << "off the grid";
      EXPECT_LE(std::fabs(q), 127.0f + 1e-4f);
      EXPECT_NEAR(out[b * 32 + i], x[b * 32 + i], d16 * 0.5f + 1e-3f * amax);
    }
  }
}

TEST(ActivationQuantTest, Q8_1BlockSumCorrection) {
  auto x = Random(96, 2);
  std::vector<float> out(96), correction(3);
  ref::RoundActivations(WeightFormat::kQ4_1, x.data(), out.data(), 96, correction.data());
  for (int b = 0; b < 3; ++b) {
    double sum = 0;
    for (int i = 0; i < 32; ++i) sum += out[b * 32 + i];
    // sum + correction is the float16-rounded block sum: within float16 precision of sum.
    EXPECT_NEAR(sum + correction[b], sum, std::fabs(sum) * 1e-3 + 1e-3);
    const float s16 = static_cast<float>(sum + correction[b]);
    EXPECT_EQ(F16ToF32(F32ToF16(s16)), s16);
  }
}

TEST(ActivationQuantTest, Q8_KKeepsLargestMagnitude) {
  auto x = Random(256, 3);
  x[17] = -9.0f;
  std::vector<float> out(256);
  ref::RoundActivations(WeightFormat::kQ6_K, x.data(), out.data(), 256);
  EXPECT_NEAR(out[17], -9.0f, 1e-5);
  const float d = 9.0f / 127.0f;
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(out[i], x[i], d * 0.5f + 1e-5f);
}

TEST(ActivationQuantTest, RoundedMatMulIsCloseToExact) {
  const int64_t rows = 5, cols = 64, n = 3;
  // Q8_0 weights: d = 0.01, q = (r * 7 + c) % 255 - 127.
  std::vector<uint8_t> w(static_cast<size_t>(rows * 2 * 34));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < 2; ++b) {
      uint8_t* block = w.data() + (r * 2 + b) * 34;
      const uint16_t d = F32ToF16(0.01f);
      std::memcpy(block, &d, 2);
      for (int i = 0; i < 32; ++i) {
        block[2 + i] = static_cast<uint8_t>(static_cast<int8_t>((r * 7 + b * 32 + i) % 255 - 127));
      }
    }
  }
  WeightMatrix m{WeightFormat::kQ8_0, rows, cols, w.data()};
  auto x = Random(n * cols, 4);
  std::vector<float> exact(static_cast<size_t>(n * rows)), rounded(exact.size());
  MatMul(RefKernels(), nullptr, x.data(), n, m, exact.data(), ActivationMode::kExact);
  MatMul(RefKernels(), nullptr, x.data(), n, m, rounded.data(), ActivationMode::kGgmlRounded);
  for (size_t i = 0; i < exact.size(); ++i) {
    EXPECT_NEAR(rounded[i], exact[i], 0.02f * (1.0f + std::fabs(exact[i])));
  }
}

}  // namespace
}  // namespace radixserve::kernels

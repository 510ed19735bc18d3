// RoPE: both layouts give the same q.k once Q/K are permuted between them (the GGUF vs HF
// checkpoint relation), and scores depend only on relative position.
#include "kernels/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace radixserve::kernels {
namespace {

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

TEST(RopeTest, LayoutsAgreeUnderPermutation) {
  const int d = 16;
  auto inv = RopeInvFreq(10000.0, d, {});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> q(d), k(d);
  for (auto& v : q) v = dist(rng);
  for (auto& v : k) v = dist(rng);
  // Interleaved element 2i <-> rotate-half element i; 2i+1 <-> i + d/2.
  auto to_half = [&](const std::vector<float>& x) {
    std::vector<float> y(d);
    for (int i = 0; i < d / 2; ++i) {
      y[i] = x[2 * i];
      y[i + d / 2] = x[2 * i + 1];
    }
    return y;
  };
  auto qh = to_half(q), kh = to_half(k);
  ApplyRope(q.data(), 1, d, d, 17, inv, RopeLayout::kInterleaved);
  ApplyRope(k.data(), 1, d, d, 5, inv, RopeLayout::kInterleaved);
  ApplyRope(qh.data(), 1, d, d, 17, inv, RopeLayout::kRotateHalf);
  ApplyRope(kh.data(), 1, d, d, 5, inv, RopeLayout::kRotateHalf);
  EXPECT_NEAR(Dot(q, k), Dot(qh, kh), 1e-5);
  EXPECT_EQ(to_half(q), qh);
}

TEST(RopeTest, RelativePositionOnly) {
  const int d = 8;
  auto inv = RopeInvFreq(500.0, d, {});
  std::vector<float> q{1, 2, 3, 4, 5, 6, 7, 8}, k{8, 7, 6, 5, 4, 3, 2, 1};
  auto q1 = q, k1 = k, q2 = q, k2 = k;
  ApplyRope(q1.data(), 1, d, d, 10, inv, RopeLayout::kRotateHalf);
  ApplyRope(k1.data(), 1, d, d, 3, inv, RopeLayout::kRotateHalf);
  ApplyRope(q2.data(), 1, d, d, 107, inv, RopeLayout::kRotateHalf);
  ApplyRope(k2.data(), 1, d, d, 100, inv, RopeLayout::kRotateHalf);
  EXPECT_NEAR(Dot(q1, k1), Dot(q2, k2), 1e-3);
}

TEST(RopeTest, Llama3Scaling) {
  // Llama 3.1 parameters: factor 8, low 1, high 4, original context 8192.
  RopeScaling s{RopeScalingType::kLlama3, 8.0, 1.0, 4.0, 8192};
  const int d = 128;
  auto plain = RopeInvFreq(500000.0, d, {});
  auto scaled = RopeInvFreq(500000.0, d, s);
  EXPECT_FLOAT_EQ(scaled[0], plain[0]);           // short wavelength: unchanged
  EXPECT_FLOAT_EQ(scaled[63], plain[63] / 8.0f);  // long wavelength: divided by factor
  for (int i = 0; i < d / 2; ++i) {
    EXPECT_LE(scaled[i], plain[i] * 1.000001f);
    EXPECT_GE(scaled[i], plain[i] / 8.0f * 0.999999f);
  }
}

}  // namespace
}  // namespace radixserve::kernels

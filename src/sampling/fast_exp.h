// FastExp: a branch-free single-precision exp that compilers vectorize (the sampler runs it over
// the whole vocabulary for every row, where libm's scalar expf dominated the step).
// Cephes-style: exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln2 / 2, degree-6 polynomial
// for exp(r). Max relative error about 2 ulp over [-87, 88]; returns 0 below -87.3 (including
// -inf) and saturates at exp(88) above. NaN input is the caller's to exclude.
#pragma once

#include <bit>
#include <cstdint>

namespace radixserve::sampling {

inline float FastExp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float underflow = x < -87.3f ? 0.0f : 1.0f;
  x = x < -87.3f ? -87.3f : x;  // ternaries (not std::clamp) keep the loop branch-free
  x = x > 88.0f ? 88.0f : x;
  const float n = (x * kLog2e + kRoundMagic) - kRoundMagic;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const int32_t exponent = static_cast<int32_t>(n) + 127;
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(exponent) << 23);
  return e * scale * underflow;
}

}  // namespace radixserve::sampling

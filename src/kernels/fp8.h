// FP8 element formats of the KV cache (the OCP 8-bit floating-point formats that SGLang's
// `--kv-cache-dtype fp8_e4m3 | fp8_e5m2` name, torch's float8_e4m3fn and float8_e5m2):
//   E4M3 ("fn"): 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, S.1111.111 is
//                NaN; largest finite 448, smallest normal 2^-6, subnormal step 2^-9.
//   E5M2:        1 sign, 5 exponent bits (bias 15), 2 mantissa bits; IEEE-like (infinities and
//                NaNs); largest finite 57344, smallest normal 2^-14, subnormal step 2^-16.
// Encoding rounds to nearest, ties to even, and saturates: magnitudes beyond the largest finite
// value (infinities included) become +-max, so a KV entry is never infinite; NaN stays NaN.
// Decoding is exact. Pure functions, thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/half.h"

namespace radixserve::kernels {

inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr float kFp8E5M2Max = 57344.0f;

namespace fp8_detail {

// One encoder for both formats: kExp exponent bits, kMan mantissa bits, kMaxCode the code of the
// largest finite magnitude, kMax its value.
template <int kExp, int kMan, uint8_t kMaxCode>
inline uint8_t EncodeFp8(float x, float max) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const auto sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  if (std::isnan(x)) return static_cast<uint8_t>(sign | 0x7Fu);
  const float a = std::fabs(x);
  if (a >= max) return static_cast<uint8_t>(sign | kMaxCode);
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  // Below the smallest normal the codes are the multiples of 2^(1 - bias - man): scale them to
  // integers (exact, a power of two) and round in the default mode (to nearest even). A result of
  // 2^man is the smallest normal, whose code is that same integer.
  const float min_normal = std::ldexp(1.0f, 1 - kBias);
  if (a < min_normal) {
    const float q = std::nearbyint(a * std::ldexp(1.0f, kBias - 1 + kMan));
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(q));
  }
  // Normal: drop the low 23 - man mantissa bits rounding to nearest even (a carry moves into the
  // exponent, which is the right result), then rebias the exponent.
  constexpr int kDrop = 23 - kMan;
  uint32_t u = bits & 0x7FFFFFFFu;
  u += ((1u << (kDrop - 1)) - 1u) + ((u >> kDrop) & 1u);
  const uint32_t code = (u >> kDrop) - (static_cast<uint32_t>(127 - kBias) << kMan);
  return static_cast<uint8_t>(sign | static_cast<uint8_t>(code));
}

}  // namespace fp8_detail

inline uint8_t F32ToFp8E4M3(float x) { return fp8_detail::EncodeFp8<4, 3, 0x7E>(x, kFp8E4M3Max); }

inline uint8_t F32ToFp8E5M2(float x) { return fp8_detail::EncodeFp8<5, 2, 0x7B>(x, kFp8E5M2Max); }

// E5M2 is the top byte of an IEEE half with the same value.
inline float Fp8E5M2ToF32(uint8_t b) { return F16ToF32(static_cast<uint16_t>(b << 8)); }

// E4M3 magnitude bits shifted into a half's exponent/mantissa fields read as 2^-8 times the value
// (the biases differ by 8, for normals and subnormals alike); the SIMD gathers use the same trick.
inline float Fp8E4M3ToF32(uint8_t b) {
  if ((b & 0x7Fu) == 0x7Fu) return std::numeric_limits<float>::quiet_NaN();
  const auto h = static_cast<uint16_t>(((b & 0x80u) << 8) | ((b & 0x7Fu) << 7));
  return F16ToF32(h) * 256.0f;
}

}  // namespace radixserve::kernels

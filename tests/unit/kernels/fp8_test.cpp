// FP8 conversions (kernels/fp8.h) against the formats' definitions written out here: a code's
// value from its sign, exponent and mantissa fields (std::ldexp), and the encoder's result as the
// nearest finite code by exhaustive search, ties to the even code, same sign as the input. Also
// every SIMD store/gather variant against the scalar functions, bit for bit.
#include "kernels/fp8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention.h"

namespace radixserve::kernels {
namespace {

struct Format {
  const char* name;
  int exp_bits, man_bits;
  bool ieee;  // E5M2: an all-ones exponent is inf/NaN; E4M3 (fn): only S.1111.111 is NaN
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);
  KvType type;
};

const Format kFormats[] = {
    {"e4m3", 4, 3, false, F32ToFp8E4M3, Fp8E4M3ToF32, KvType::kFp8E4M3},
    {"e5m2", 5, 2, true, F32ToFp8E5M2, Fp8E5M2ToF32, KvType::kFp8E5M2},
};

// The value of code b by the definition; NaN for NaN codes, inf for E5M2's infinities.
double DefinedValue(const Format& f, uint8_t b) {
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  const int e = (b >> f.man_bits) & ((1 << f.exp_bits) - 1);
  const int m = b & ((1 << f.man_bits) - 1);
  const double sign = (b & 0x80) != 0 ? -1.0 : 1.0;
  if (f.ieee && e == (1 << f.exp_bits) - 1) {
    return m == 0 ? sign * std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::quiet_NaN();
  }
  if (!f.ieee && (b & 0x7F) == 0x7F) return std::numeric_limits<double>::quiet_NaN();
  if (e == 0) return sign * std::ldexp(m, 1 - bias - f.man_bits);
  return sign * std::ldexp((1 << f.man_bits) + m, e - bias - f.man_bits);
}

// Nearest finite code of x's sign; ties go to the even code. Beyond the largest finite value
// (infinity included) that value is the nearest (clamped first: in double arithmetic the
// distances from a huge x to all codes would round to the same number).
uint8_t NearestCode(const Format& f, float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  double largest = 0.0;
  for (int c = 0; c < 0x80; ++c) {
    const double v = DefinedValue(f, static_cast<uint8_t>(c));
    if (std::isfinite(v)) largest = std::max(largest, v);
  }
  const double a = std::min(std::fabs(static_cast<double>(x)), largest);
  int best = -1;
  double best_err = 0.0;
  for (int c = 0; c < 0x80; ++c) {
    const double v = DefinedValue(f, static_cast<uint8_t>(c));
    if (!std::isfinite(v)) continue;
    const double err = std::fabs(v - a);
    if (best < 0 || err < best_err || (err == best_err && c % 2 == 0)) {
      best = c;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(sign | best);
}

TEST(Fp8Test, DecodeMatchesTheFieldDefinitionForAll256Codes) {
  for (const Format& f : kFormats) {
    for (int c = 0; c < 256; ++c) {
      const double want = DefinedValue(f, static_cast<uint8_t>(c));
      const float got = f.decode(static_cast<uint8_t>(c));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << f.name << " code " << c;
      } else {
        EXPECT_EQ(static_cast<double>(got), want) << f.name << " code " << c;
        EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << f.name << " code " << c;
      }
    }
  }
  EXPECT_EQ(Fp8E4M3ToF32(0x7E), kFp8E4M3Max);
  EXPECT_EQ(Fp8E5M2ToF32(0x7B), kFp8E5M2Max);
  EXPECT_EQ(Fp8E4M3ToF32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(Fp8E5M2ToF32(0x01), std::ldexp(1.0f, -16));
}

// Every code, every midpoint between neighbouring codes (exact ties), and points just either
// side of each midpoint, plus random values spanning the whole range and beyond.
std::vector<float> EncodeInputs(const Format& f) {
  std::vector<double> finite;
  for (int c = 0; c < 0x80; ++c) {
    const double v = DefinedValue(f, static_cast<uint8_t>(c));
    if (std::isfinite(v)) finite.push_back(v);
  }
  std::vector<float> in;
  for (size_t i = 0; i < finite.size(); ++i) {
    in.push_back(static_cast<float>(finite[i]));
    const double mid = i + 1 < finite.size() ? (finite[i] + finite[i + 1]) / 2
                                             : finite[i] * (1 + std::ldexp(1.0, -f.man_bits - 1));
    const auto m = static_cast<float>(mid);  // exact: a few significant bits
    in.push_back(m);
    in.push_back(std::nextafter(m, 0.0f));
    in.push_back(std::nextafter(m, 1e30f));
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> log2(-30.0, 20.0);
  for (int i = 0; i < 4000; ++i) in.push_back(static_cast<float>(std::exp2(log2(rng))));
  in.push_back(std::numeric_limits<float>::infinity());
  in.push_back(std::numeric_limits<float>::max());
  in.push_back(std::numeric_limits<float>::denorm_min());
  const size_t n = in.size();
  for (size_t i = 0; i < n; ++i) in.push_back(-in[i]);
  return in;
}

TEST(Fp8Test, EncodeRoundsToNearestEvenAndSaturates) {
  for (const Format& f : kFormats) {
    for (float x : EncodeInputs(f)) {
      ASSERT_EQ(f.encode(x), NearestCode(f, x)) << f.name << " x=" << x;
    }
    const float nan = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(std::isnan(f.decode(f.encode(nan)))) << f.name;
  }
  // Worked by hand: 1.0625 lies halfway between 1 (0x38, mantissa 000) and 1.125 (0x39): even.
  EXPECT_EQ(F32ToFp8E4M3(1.0625f), 0x38);
  EXPECT_EQ(F32ToFp8E4M3(1.1875f), 0x3A);  // between 0x39 and 0x3A: to the even 0x3A
  EXPECT_EQ(F32ToFp8E4M3(1000.0f), 0x7E);  // saturates to 448, never the NaN code
  EXPECT_EQ(F32ToFp8E5M2(-1e9f), 0xFB);    // saturates to -57344, not -inf
  EXPECT_EQ(F32ToFp8E4M3(-0.0f), 0x80);
}

TEST(Fp8Test, EverySimdVariantStoresAndGathersLikeTheScalarFunctions) {
  for (const Format& f : kFormats) {
    std::vector<float> in = EncodeInputs(f);
    in.resize(in.size() / 8 * 8 + 5);  // leaves a scalar tail
    for (float scale : {1.0f, 0.01f, 7.5f}) {
      std::vector<uint8_t> want(in.size());
      for (size_t i = 0; i < in.size(); ++i) want[i] = f.encode(in[i] * (1.0f / scale));
      for (const AttentionKernels* k : AvailableAttentionKernels()) {
        std::vector<uint8_t> got(in.size());
        k->store(in.data(), static_cast<int64_t>(in.size()), f.type, scale, got.data());
        for (size_t i = 0; i < in.size(); ++i) {
          ASSERT_EQ(got[i], want[i]) << k->name << " " << f.name << " x=" << in[i];
        }
      }
    }
    // All non-NaN codes as one row, gathered back.
    std::vector<uint8_t> codes;
    for (int c = 0; c < 256; ++c) {
      if (!std::isnan(DefinedValue(f, static_cast<uint8_t>(c))))
        codes.push_back(static_cast<uint8_t>(c));
    }
    const auto d = static_cast<int64_t>(codes.size());
    for (const AttentionKernels* k : AvailableAttentionKernels()) {
      std::vector<float> got(codes.size());
      const int32_t slot = 0;
      k->gather(codes.data(), f.type, 0.5f, &slot, 1, d, 0, d, got.data());
      for (size_t i = 0; i < codes.size(); ++i) {
        ASSERT_EQ(got[i], f.decode(codes[i]) * 0.5f)
            << k->name << " " << f.name << " code " << static_cast<int>(codes[i]);
      }
    }
  }
}

}  // namespace
}  // namespace radixserve::kernels

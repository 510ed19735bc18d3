// MatMul over each weight format and kernel variant against a double-precision product of the
// dequantized weights; dequantization of hand-built blocks against values worked out by hand.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/half.h"
#include "kernels/mxfp4.h"
#include "kernels/ref/dequantize.h"

namespace radixserve::kernels {
namespace {

constexpr WeightFormat kAllFormats[] = {
    WeightFormat::kF32,  WeightFormat::kF16,  WeightFormat::kBF16, WeightFormat::kQ8_0,
    WeightFormat::kQ4_0, WeightFormat::kQ4_1, WeightFormat::kQ5_0, WeightFormat::kQ5_1,
    WeightFormat::kQ4_K, WeightFormat::kQ5_K, WeightFormat::kQ6_K, WeightFormat::kMXFP4};

// Random bytes with every half-precision scale field set to a small finite value, so any block
// decodes to finite numbers.
std::vector<uint8_t> RandomWeights(WeightFormat format, int64_t rows, int64_t cols,
                                   std::mt19937& rng) {
  const int64_t row_bytes = *StorageBytes(format, cols);
  std::vector<uint8_t> data(static_cast<size_t>(rows * row_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : data) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  auto put_half = [&](uint8_t* p) {
    uint16_t h = F32ToF16(scale(rng));
    std::memcpy(p, &h, 2);
  };
  const int64_t block_bytes = BlockBytes(format);
  for (int64_t off = 0; off < static_cast<int64_t>(data.size()); off += block_bytes) {
    uint8_t* b = data.data() + off;
    switch (format) {
      case WeightFormat::kF32: {
        float f = scale(rng) * 20.0f;
        std::memcpy(b, &f, 4);
        break;
      }
      case WeightFormat::kF16:
        put_half(b);
        break;
      case WeightFormat::kBF16: {
        uint16_t h = F32ToBf16(scale(rng));
        std::memcpy(b, &h, 2);
        break;
      }
      case WeightFormat::kQ8_0:
      case WeightFormat::kQ4_0:
      case WeightFormat::kQ5_0:
        put_half(b);
        break;
      case WeightFormat::kQ4_1:
      case WeightFormat::kQ5_1:
      case WeightFormat::kQ4_K:
      case WeightFormat::kQ5_K:
        put_half(b);
        put_half(b + 2);
        break;
      case WeightFormat::kQ6_K:
        put_half(b + 208);
        break;
      case WeightFormat::kMXFP4:  // scales 2^-10 .. 2^-4
        b[0] = static_cast<uint8_t>(118 + byte(rng) % 7);
        break;
    }
  }
  return data;
}

TEST(MatMulTest, AllFormatsAndVariantsMatchDoubleProduct) {
  std::mt19937 rng(7);
  for (WeightFormat format : kAllFormats) {
    SCOPED_TRACE(std::string(FormatName(format)));
    const int64_t cols = BlockElements(format) == 256 ? 512 : 96;
    const int64_t rows = 37, n = 5;
    auto bytes = RandomWeights(format, rows, cols, rng);
    WeightMatrix w{format, rows, cols, bytes.data()};
    std::vector<float> dense(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) DequantizeRow(w, r, dense.data() + r * cols);
    for (float v : dense) ASSERT_TRUE(std::isfinite(v));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n * cols));
    for (auto& v : x) v = dist(rng);
    ThreadPool pool(2);
    for (const KernelTable* table : AvailableKernels()) {
      SCOPED_TRACE(std::string(table->name));
      std::vector<float> y(static_cast<size_t>(n * rows));
      MatMul(*table, &pool, x.data(), n, w, y.data());
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
          double expect = 0.0;
          for (int64_t c = 0; c < cols; ++c)
            expect += double(x[t * cols + c]) * dense[r * cols + c];
          EXPECT_NEAR(y[t * rows + r], expect, 1e-4 * (1.0 + std::fabs(expect)));
        }
      }
    }
  }
}

TEST(DequantizeTest, HandBuiltBlocks) {
  // Q8_0: d = 0.5, q[i] = i - 16.
  uint8_t q8[34];
  uint16_t d = F32ToF16(0.5f);
  std::memcpy(q8, &d, 2);
  for (int i = 0; i < 32; ++i) q8[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(i - 16));
  float out[32];
  ref::Dequantize(WeightFormat::kQ8_0, q8, out, 32);
  for (int i = 0; i < 32; ++i) EXPECT_FLOAT_EQ(out[i], 0.5f * static_cast<float>(i - 16));

  // Q4_1: d = 2, m = -1; byte i = (hi << 4) | lo with lo = i % 16, hi = 15 - i % 16.
  uint8_t q41[20];
  uint16_t d2 = F32ToF16(2.0f), m = F32ToF16(-1.0f);
  std::memcpy(q41, &d2, 2);
  std::memcpy(q41 + 2, &m, 2);
  for (int i = 0; i < 16; ++i) q41[4 + i] = static_cast<uint8_t>(((15 - i) << 4) | i);
  ref::Dequantize(WeightFormat::kQ4_1, q41, out, 32);
  for (int i = 0; i < 16; ++i) {
    EXPECT_FLOAT_EQ(out[i], 2.0f * static_cast<float>(i) - 1.0f);
    EXPECT_FLOAT_EQ(out[i + 16], 2.0f * static_cast<float>(15 - i) - 1.0f);
  }

  // MXFP4: exponent byte 130 (scale 2^(130 - 127) = 8, halved for the doubled E2M1 values); byte
  // i holds code i in its low nibble and code 15 - i in its high one. E2M1 codes 0-7 are
  // 0, 0.5, 1, 1.5, 2, 3, 4, 6 and codes 8-15 their negatives (OCP MX spec).
  const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  uint8_t mx[17];
  mx[0] = 130;
  for (int i = 0; i < 16; ++i) mx[1 + i] = static_cast<uint8_t>(((15 - i) << 4) | i);
  ref::Dequantize(WeightFormat::kMXFP4, mx, out, 32);
  for (int i = 0; i < 16; ++i) {
    EXPECT_FLOAT_EQ(out[i], 8.0f * e2m1[i]);
    EXPECT_FLOAT_EQ(out[i + 16], 8.0f * e2m1[15 - i]);
  }
  // The smallest exponents are subnormal scales: 2^-127 and 2^-126 times the E2M1 value.
  EXPECT_EQ(Mxfp4Scale(0) * 2.0f, std::ldexp(1.0f, -127));
  EXPECT_EQ(Mxfp4Scale(1) * 2.0f, std::ldexp(1.0f, -126));
  EXPECT_EQ(Mxfp4Scale(254) * 2.0f, std::ldexp(1.0f, 127));
}

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(F32ToF16(1.0f), 0x3C00);
  EXPECT_EQ(F32ToF16(-2.0f), 0xC000);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7BFF);
  EXPECT_FLOAT_EQ(F16ToF32(0x3555), 0.333251953125f);
  EXPECT_FLOAT_EQ(F16ToF32(0x0001), 5.960464477539063e-08f);
  EXPECT_FLOAT_EQ(Bf16ToF32(0x3F80), 1.0f);
  for (int h = 0; h < 0x7C00; h += 7) {
    EXPECT_EQ(F32ToF16(F16ToF32(static_cast<uint16_t>(h))), h);
  }
}

}  // namespace
}  // namespace radixserve::kernels

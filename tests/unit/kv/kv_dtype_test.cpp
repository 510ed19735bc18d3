// KvDtype parsing and conversions. Expected bit patterns follow from the IEEE 754 binary16 and
// bfloat16 definitions (sign | exponent | mantissa), worked out by hand in the comments.
#include "kv/kv_dtype.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "kernels/half.h"

namespace radixserve::kv {
namespace {

TEST(KvDtypeTest, ParsesFlagSpellings) {
  EXPECT_EQ(ParseKvCacheDtype("auto", KvDtype::kBF16).value(), KvDtype::kBF16);
  EXPECT_EQ(ParseKvCacheDtype("auto", KvDtype::kF32).value(), KvDtype::kF32);
  EXPECT_EQ(ParseKvCacheDtype("fp32", KvDtype::kBF16).value(), KvDtype::kF32);
  EXPECT_EQ(ParseKvCacheDtype("bf16", KvDtype::kF32).value(), KvDtype::kBF16);
  EXPECT_EQ(ParseKvCacheDtype("bfloat16", KvDtype::kF32).value(), KvDtype::kBF16);
  EXPECT_EQ(ParseKvCacheDtype("fp16", KvDtype::kF32).value(), KvDtype::kF16);
  EXPECT_EQ(KvDtypeSize(KvDtype::kF32), 4u);
  EXPECT_EQ(KvDtypeSize(KvDtype::kBF16), 2u);
  EXPECT_EQ(KvDtypeSize(KvDtype::kF16), 2u);
}

TEST(KvDtypeTest, Fp8ParsesFp4IsUnsupportedAndGarbageIsInvalid) {
  EXPECT_EQ(ParseKvCacheDtype("fp8_e4m3", KvDtype::kF32).value(), KvDtype::kFp8E4M3);
  EXPECT_EQ(ParseKvCacheDtype("fp8_e5m2", KvDtype::kF32).value(), KvDtype::kFp8E5M2);
  EXPECT_EQ(KvDtypeSize(KvDtype::kFp8E4M3), 1u);
  EXPECT_EQ(KvDtypeSize(KvDtype::kFp8E5M2), 1u);
  EXPECT_EQ(KvDtypeName(KvDtype::kFp8E4M3), "float8_e4m3fn");
  Expected<KvDtype> fp4 = ParseKvCacheDtype("fp4_e2m1", KvDtype::kF32);
  ASSERT_FALSE(fp4.ok());
  EXPECT_EQ(fp4.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(ParseKvCacheDtype("int8", KvDtype::kF32).value(), KvDtype::kInt8);
  EXPECT_EQ(KvDtypeName(KvDtype::kInt8), "int8");
  Expected<KvDtype> bad = ParseKvCacheDtype("int4", KvDtype::kF32);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(KvDtypeTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(kernels::F32ToBf16(1.0f), 0x3F80);   // 0x3F800000 truncated
  EXPECT_EQ(kernels::F32ToBf16(-2.0f), 0xC000);  // sign set, exponent 128
  // 1 + 2^-8 is exactly halfway between 1.0 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(kernels::F32ToBf16(1.00390625f), 0x3F80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: rounds up to 0x3F82.
  EXPECT_EQ(kernels::F32ToBf16(1.01171875f), 0x3F82);
  // Just above halfway rounds up.
  EXPECT_EQ(kernels::F32ToBf16(std::nextafter(1.00390625f, 2.0f)), 0x3F81);
  EXPECT_EQ(kernels::F32ToBf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_TRUE(
      std::isnan(kernels::Bf16ToF32(kernels::F32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(kernels::Bf16ToF32(0x3FC0), 1.5f);
}

TEST(KvDtypeTest, Fp16KnownValues) {
  EXPECT_EQ(kernels::F32ToF16(1.0f), 0x3C00);      // exponent 15, mantissa 0
  EXPECT_EQ(kernels::F32ToF16(65504.0f), 0x7BFF);  // largest finite half
  EXPECT_EQ(kernels::F32ToF16(65536.0f), 0x7C00);  // overflows to +inf
  EXPECT_EQ(kernels::F32ToF16(-0.5f), 0xB800);
  EXPECT_EQ(kernels::F32ToF16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(kernels::F16ToF32(0x3555), 0.333251953125f);        // 1/3 rounded: 1.0101010101b * 2^-2
}

TEST(KvDtypeTest, RowsRoundTrip) {
  const float src[4] = {1.0f, -0.5f, 3.25f, 1024.0f};  // exact in every dtype
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBF16, KvDtype::kF16}) {
    unsigned char buffer[16];
    float back[4];
    StoreRow(src, 4, dtype, buffer);
    LoadRow(buffer, 4, dtype, back);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(back[i], src[i]) << KvDtypeName(dtype);
  }
}

TEST(KvDtypeTest, Fp8RowsStoreValueOverScale) {
  // With scale 0.5 the codes hold 2, -1, 6.5 and 2048: exact in both fp8 formats except 6.5 in
  // E5M2 (mantissa 1.625 needs three bits: a tie between 6 and 7, to the even mantissa 1.5 = 6).
  const float src[4] = {1.0f, -0.5f, 3.25f, 1024.0f};
  unsigned char buffer[4];
  float back[4];
  StoreRow(src, 4, KvDtype::kFp8E4M3, buffer, 0.5f);
  EXPECT_EQ(buffer[0], 0x40);  // 2 = 2^1: exponent 1 + 7 = 8, mantissa 0
  LoadRow(buffer, 4, KvDtype::kFp8E4M3, back, 0.5f);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], -0.5f);
  EXPECT_EQ(back[2], 3.25f);
  EXPECT_EQ(back[3], 224.0f);  // 2048 saturates to 448, times 0.5
  StoreRow(src, 4, KvDtype::kFp8E5M2, buffer, 0.5f);
  LoadRow(buffer, 4, KvDtype::kFp8E5M2, back, 0.5f);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], -0.5f);
  EXPECT_EQ(back[2], 3.0f);
  EXPECT_EQ(back[3], 1024.0f);
}

}  // namespace
}  // namespace radixserve::kv

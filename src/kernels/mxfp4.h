// MXFP4 (OCP microscaling FP4, as ggml stores it for gpt-oss): a block of 32 weights is one E8M0
// exponent byte e followed by 16 bytes of 4-bit E2M1 codes, element i in the low nibble of byte
// i and element i + 16 in the high nibble. ggml keeps the E2M1 values doubled (so they are
// integers, kMxfp4Values) and halves the scale to match: weight = Mxfp4Scale(e) * value, with
// Mxfp4Scale(e) = 2^(e - 128). Both factors are exact in float.
#pragma once

#include <cstdint>
#include <cstring>

namespace radixserve::kernels {

// The 16 E2M1 codes' values, doubled.
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128): half of the E8M0 scale 2^(e - 127), built bit by bit (subnormal for e < 2).
inline float Mxfp4Scale(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

}  // namespace radixserve::kernels

// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized on its own _mm512_undefined_* helpers
// when inlined into masked intrinsics; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/gelu_f16_table.h"

#include <immintrin.h>

#include <cmath>
#include <vector>

#include "kernels/half.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels {
namespace {

// GELU of every f16 value, computed in f32 and rounded to f16, stored widened to f32 so the
// vector path can gather it directly (256 KiB, L2-resident).
const std::vector<float>& Table() {
  static const std::vector<float> table = [] {
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    constexpr float kCoef = 0.044715f;
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) {
      const float x = F16ToF32(static_cast<uint16_t>(h));
      const float g = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
      t[h] = F16ToF32(F32ToF16(g));
    }
    return t;
  }();
  return table;
}

constexpr float kLow = -10.0f, kHigh = 10.0f;

float Lookup(const float* table, float x) {
  if (x <= kLow) return 0.0f;
  if (x >= kHigh) return x;
  return table[F32ToF16(x)];
}

RADIX_AVX512 void Avx512Mul(const float* table, const float* gate, const float* up, float* out,
                            int64_t n) {
  const __m512 low = _mm512_set1_ps(kLow), high = _mm512_set1_ps(kHigh);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(gate + i);
    const __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 g = _mm512_i32gather_ps(_mm512_cvtepu16_epi32(h), table, 4);
    g = _mm512_mask_mov_ps(g, _mm512_cmp_ps_mask(x, high, _CMP_GE_OQ), x);
    g = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, low, _CMP_NLE_UQ), g);
    _mm512_storeu_ps(out + i, _mm512_mul_ps(g, _mm512_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = Lookup(table, gate[i]) * up[i];
}

}  // namespace

float GeluTanhF16(float x) { return Lookup(Table().data(), x); }

void GeluTanhF16TableMul(const float* gate, const float* up, float* out, int64_t n) {
  static const bool avx512 = x86::CpuHasAvx512();
  const float* table = Table().data();
  if (avx512) {
    Avx512Mul(table, gate, up, out, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = Lookup(table, gate[i]) * up[i];
}

}  // namespace radixserve::kernels

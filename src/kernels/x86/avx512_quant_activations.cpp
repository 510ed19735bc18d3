// AVX-512 activation quantization for the integer MatMul: the same arithmetic as
// ref::QuantizeActivationRows (same products, round-to-nearest-even conversions, the scalar
// float16 helpers for the scales), so the codes and scales are bit-identical to it.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "kernels/half.h"
#include "kernels/x86/quant_kernels.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels::x86 {
namespace {

RADIX_AVX512 float AbsMax(const float* x, int64_t count) {
  __m512 m = _mm512_setzero_ps();
  for (int64_t i = 0; i < count; i += 16)
    m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
  return _mm512_reduce_max_ps(m);
}

// q = round_even(x * scale) for 16 elements, stored as int8; returns the int32 lanes.
RADIX_AVX512 __m512i Codes16(const float* x, __m512 scale, int8_t* q) {
  const __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), scale));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtepi32_epi8(v));
  return v;
}

RADIX_AVX512 void Row32(WeightFormat weight, int32_t offset, const float* x, int64_t subs,
                        int8_t* q, float* d, float* s, int32_t* bias, int16_t* sums) {
  const bool block_sums = ref::UsesBlockSums(weight);
  for (int64_t b = 0; b < subs; ++b) {
    const float amax = AbsMax(x + 32 * b, 32);
    const float scale = amax / 127.0f;
    const __m512 inverse = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    const __m512i lo = Codes16(x + 32 * b, inverse, q + 32 * b);
    const __m512i hi = Codes16(x + 32 * b + 16, inverse, q + 32 * b + 16);
    const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(lo, hi));
    d[b] = F16ToF32(F32ToF16(scale));
    s[b] = block_sums ? F16ToF32(F32ToF16(scale * static_cast<float>(sum))) : 0.0f;
    bias[b] = -offset * sum;
    sums[b] = static_cast<int16_t>(sum);
  }
}

RADIX_AVX512 void RowK(int32_t offset, const float* x, int64_t cols, int64_t sub, int8_t* q,
                       float* d, float* s, int32_t* bias, int16_t* sums) {
  for (int64_t b = 0; b < cols; b += 256) {
    const float amax = AbsMax(x + b, 256);
    const int64_t first = b / sub, last = (b + 256) / sub;
    if (amax == 0.0f) {
      ZeroBlockK(b, first, last, q, d, s, bias, sums);
      continue;
    }
    // The first element of largest magnitude, as the scalar scan picks it.
    float max = 0.0f;
    const __m512 vamax = _mm512_set1_ps(amax);
    for (int64_t i = b; i < b + 256; i += 16) {
      const __mmask16 hit =
          _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + i)), vamax, _CMP_EQ_OQ);
      if (hit != 0) {
        max = x[i + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const float scale = 1.0f / iscale;
    const __m512 viscale = _mm512_set1_ps(iscale);
    const __m512i cap = _mm512_set1_epi32(127);
    for (int64_t i = b; i < b + 256; i += 16) {
      const __m512i v =
          _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), viscale)), cap);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(v));
    }
    for (int64_t g = first; g < last; ++g) {
      __m512i acc = _mm512_setzero_si512();
      for (int64_t i = 0; i < sub; i += 16) {
        acc = _mm512_add_epi32(acc, _mm512_cvtepi8_epi32(_mm_loadu_si128(
                                        reinterpret_cast<const __m128i*>(q + g * sub + i))));
      }
      const int sum = _mm512_reduce_add_epi32(acc);
      d[g] = scale;
      s[g] = scale * static_cast<float>(sum);
      bias[g] = -offset * sum;
      sums[g] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace

RADIX_AVX512 void QuantizeActivationRowsAvx512(WeightFormat weight, int32_t offset, const float* x,
                                               int64_t begin, int64_t end,
                                               ref::QuantizedActivations* out) {
  QuantizeRowsWith(weight, offset, x, begin, end, out, RowK, Row32);
}

}  // namespace radixserve::kernels::x86

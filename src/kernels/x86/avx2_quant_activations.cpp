// AVX2 activation quantization for the integer MatMul: the AVX-512 twin's arithmetic eight lanes
// at a time (same products, round-to-nearest-even conversions, the scalar float16 helpers for the
// scales), so the codes and scales are bit-identical to ref::QuantizeActivationRows.
#include <immintrin.h>

#include <algorithm>

#include "kernels/half.h"
#include "kernels/x86/quant_kernels.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels::x86 {
namespace {

RADIX_AVX2 inline __m256 Abs(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

RADIX_AVX2 float AbsMax(const float* x, int64_t count) {
  __m256 m = _mm256_setzero_ps();
  for (int64_t i = 0; i < count; i += 8) m = _mm256_max_ps(m, Abs(_mm256_loadu_ps(x + i)));
  return Max8(m);
}

RADIX_AVX2 int SumLanes(__m256i v) {
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
  return _mm_cvtsi128_si32(h);
}

// Codes of 32 elements, round_even(x * scale) capped at `cap`, stored as int8 (the values fit,
// so the saturating packs only narrow them); v[k] keeps elements 8k .. 8k + 7 as int32.
RADIX_AVX2 void Codes32(const float* x, __m256 scale, __m256i cap, int8_t* q, __m256i* v) {
  for (int k = 0; k < 4; ++k) {
    v[k] =
        _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), scale)), cap);
  }
  // The packs work per 128 bits: dword k of the result holds elements 4k' .. of vector k % 4.
  const __m256i bytes =
      _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(q),
      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

RADIX_AVX2 void Row32(WeightFormat weight, int32_t offset, const float* x, int64_t subs, int8_t* q,
                      float* d, float* s, int32_t* bias, int16_t* sums) {
  const bool block_sums = ref::UsesBlockSums(weight);
  const __m256i no_cap = _mm256_set1_epi32(127);  // |x * 127 / amax| rounds to at most 127
  for (int64_t b = 0; b < subs; ++b) {
    const float amax = AbsMax(x + 32 * b, 32);
    const float scale = amax / 127.0f;
    const __m256 inverse = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    __m256i v[4];
    Codes32(x + 32 * b, inverse, no_cap, q + 32 * b, v);
    const int sum =
        SumLanes(_mm256_add_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3])));
    d[b] = F16ToF32(F32ToF16(scale));
    s[b] = block_sums ? F16ToF32(F32ToF16(scale * static_cast<float>(sum))) : 0.0f;
    bias[b] = -offset * sum;
    sums[b] = static_cast<int16_t>(sum);
  }
}

// The first of the 256 values at x of the largest magnitude, as the scalar scan picks it (zero
// when all are): the one of that magnitude unless both signs reach it.
RADIX_AVX2 float FirstLargest(const float* x) {
  __m256 lo[4], hi[4];  // four independent chains
  for (int k = 0; k < 4; ++k) lo[k] = hi[k] = _mm256_loadu_ps(x + 8 * k);
  for (int i = 4; i < 32; i += 4) {
    for (int k = 0; k < 4; ++k) {
      const __m256 v = _mm256_loadu_ps(x + 8 * (i + k));
      lo[k] = _mm256_min_ps(lo[k], v);
      hi[k] = _mm256_max_ps(hi[k], v);
    }
  }
  const float top = Max8(_mm256_max_ps(_mm256_max_ps(hi[0], hi[1]), _mm256_max_ps(hi[2], hi[3])));
  const float bottom =
      Min8(_mm256_min_ps(_mm256_min_ps(lo[0], lo[1]), _mm256_min_ps(lo[2], lo[3])));
  const float amax = std::max(top, -bottom);
  if (amax == 0.0f) return 0.0f;
  if (top != -bottom) return top == amax ? top : bottom;
  const __m256 vamax = _mm256_set1_ps(amax);
  for (int i = 0;; i += 8) {
    const int hit =
        _mm256_movemask_ps(_mm256_cmp_ps(Abs(_mm256_loadu_ps(x + i)), vamax, _CMP_EQ_OQ));
    if (hit != 0) return x[i + __builtin_ctz(static_cast<unsigned>(hit))];
  }
}

// One 256-block at x quantized by iscale (its scale 1 / iscale): codes at q, and its sub-blocks
// from first on.
RADIX_AVX2 void BlockK(int32_t offset, const float* x, float iscale, float scale, int64_t sub,
                       int8_t* q, int64_t first, float* d, float* s, int32_t* bias, int16_t* sums) {
  const __m256 viscale = _mm256_set1_ps(iscale);
  const __m256i cap = _mm256_set1_epi32(127);
  auto put = [&](int64_t g, int sum) {  // sub-block g's scale, sums and bias
    d[g] = scale;
    s[g] = scale * static_cast<float>(sum);
    bias[g] = -offset * sum;
    sums[g] = static_cast<int16_t>(sum);
  };
  for (int64_t i = 0; i < 256; i += 32) {
    __m256i v[4];
    Codes32(x + i, viscale, cap, q + i, v);
    // Sub-blocks of 32 (or 16: Q6_K) elements of this run of 32.
    const __m256i halves[2] = {_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3])};
    if (sub == 32) {
      put(first + i / 32, SumLanes(_mm256_add_epi32(halves[0], halves[1])));
    } else {
      for (int h = 0; h < 2; ++h) put(first + i / 16 + h, SumLanes(halves[h]));
    }
  }
}

// A run of 8 blocks' scales (QuantizeRowKInRuns): iscale = -127 / max, scale = 1 / iscale
// (blocks of zeros divide 1 instead, and are not read).
RADIX_AVX2 void RunScales(const float* max, float* iscale, float* scale) {
  const __m256 vmax = _mm256_load_ps(max);
  const __m256 nonzero = _mm256_cmp_ps(vmax, _mm256_setzero_ps(), _CMP_NEQ_UQ);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 viscale =
      _mm256_div_ps(_mm256_set1_ps(-127.0f), _mm256_blendv_ps(one, vmax, nonzero));
  _mm256_store_ps(iscale, viscale);
  _mm256_store_ps(scale, _mm256_div_ps(one, viscale));
}

RADIX_AVX2 void RowK(int32_t offset, const float* x, int64_t cols, int64_t sub, int8_t* q, float* d,
                     float* s, int32_t* bias, int16_t* sums) {
  QuantizeRowKInRuns<8>(offset, x, cols, sub, q, d, s, bias, sums, FirstLargest, RunScales, BlockK);
}

}  // namespace

RADIX_AVX2 void QuantizeActivationRowsAvx2(WeightFormat weight, int32_t offset, const float* x,
                                           int64_t begin, int64_t end,
                                           ref::QuantizedActivations* out) {
  QuantizeRowsWith(weight, offset, x, begin, end, out, RowK, Row32);
}

}  // namespace radixserve::kernels::x86

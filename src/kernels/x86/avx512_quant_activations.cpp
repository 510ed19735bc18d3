// AVX-512 activation quantization for the integer MatMul: the same arithmetic as
// ref::QuantizeActivationRows (same products and divisions, round-to-nearest-even conversions,
// float16 scales rounded to nearest even as the scalar helpers round them), so the codes and
// scales are bit-identical to it. Blocks are quantized a row's worth at a time where that takes
// work off each block's dependency chain: the scales' divisions, and the sums of sub-blocks
// (a transpose of sums rather than one horizontal sum each).
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

// Lanes added (kMax: the larger taken, for non-negative values).
template <bool kMax>
[[gnu::always_inline]] RADIX_AVX512 inline __m512i Combine(__m512i a, __m512i b) {
  return kMax ? _mm512_max_epi32(a, b) : _mm512_add_epi32(a, b);
}

// [a's chunks 0 . 1, a's 2 . 3, b's 0 . 1, b's 2 . 3] (128-bit chunks, . being Combine).
template <bool kMax>
[[gnu::always_inline]] RADIX_AVX512 inline __m512i CombineChunkPairs(__m512i a, __m512i b) {
  return Combine<kMax>(_mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Lane k: v[k]'s 16 lanes added (kMax: the largest of them, for non-negative values such as the
// bits of absolute floats), for 16 vectors: a transpose that combines pairs of 32-bit lanes, then
// of 64-bit lanes within each 128-bit chunk, then the chunks.
template <bool kMax>
[[gnu::always_inline]] RADIX_AVX512 inline __m512i LaneReduce16(const __m512i* v) {
  __m512i pairs[8], quads[4];
  for (int k = 0; k < 8; ++k) {
    // Per chunk: [a0 . a2, b0 . b2, a1 . a3, b1 . b3] of a = v[2k], b = v[2k + 1].
    pairs[k] = Combine<kMax>(_mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]),
                             _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
  }
  for (int k = 0; k < 4; ++k) {
    // Per chunk c: v[4k .. 4k + 3] over chunk c.
    quads[k] = Combine<kMax>(_mm512_unpacklo_epi64(pairs[2 * k], pairs[2 * k + 1]),
                             _mm512_unpackhi_epi64(pairs[2 * k], pairs[2 * k + 1]));
  }
  // Chunk k of the result: quads[k]'s four chunks.
  return CombineChunkPairs<kMax>(CombineChunkPairs<kMax>(quads[0], quads[1]),
                                 CombineChunkPairs<kMax>(quads[2], quads[3]));
}

// float16 rounding (nearest even) and back, as F16ToF32(F32ToF16(v)) per lane for every value
// but NaNs' payloads.
RADIX_AVX512 __m512 RoundF16(__m512 v) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// 16 sub-blocks of 32 (x, q, d, s, bias and sums at the first), as Row32 quantizes each.
RADIX_AVX512 void Row32Groups16(bool block_sums, int32_t offset, const float* x, int8_t* q,
                                float* d, float* s, int32_t* bias, int16_t* sums) {
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
  __m512i abs_max[16];
  for (int k = 0; k < 16; ++k) {
    abs_max[k] = _mm512_max_epi32(_mm512_and_si512(_mm512_loadu_si512(x + 32 * k), magnitude),
                                  _mm512_and_si512(_mm512_loadu_si512(x + 32 * k + 16), magnitude));
  }
  const __m512 amax = _mm512_castsi512_ps(LaneReduce16<true>(abs_max));
  const __m512 limit = _mm512_set1_ps(127.0f);
  const __m512 scale = _mm512_div_ps(amax, limit);
  alignas(64) float inverse[16];
  _mm512_store_ps(
      inverse,
      _mm512_maskz_div_ps(_mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_UQ), limit, amax));
  __m512i codes[16];
  for (int k = 0; k < 16; ++k) {
    const __m512 iv = _mm512_set1_ps(inverse[k]);
    codes[k] = _mm512_add_epi32(Codes16(x + 32 * k, iv, q + 32 * k),
                                Codes16(x + 32 * k + 16, iv, q + 32 * k + 16));
  }
  const __m512i sum = LaneReduce16<false>(codes);
  _mm512_storeu_ps(d, RoundF16(scale));
  _mm512_storeu_ps(s, block_sums ? RoundF16(_mm512_mul_ps(scale, _mm512_cvtepi32_ps(sum)))
                                 : _mm512_setzero_ps());
  _mm512_storeu_si512(bias, _mm512_mullo_epi32(_mm512_set1_epi32(-offset), sum));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums), _mm512_cvtepi32_epi16(sum));
}

// Sub-blocks [g, g + 16) of a 256-block (Q6_K's 16-element ones) from their code sums.
RADIX_AVX512 void StoreGroups(int32_t offset, float scale, __m512i sum, int64_t g, float* d,
                              float* s, int32_t* bias, int16_t* sums) {
  _mm512_storeu_ps(d + g, _mm512_set1_ps(scale));
  _mm512_storeu_ps(s + g, _mm512_mul_ps(_mm512_set1_ps(scale), _mm512_cvtepi32_ps(sum)));
  _mm512_storeu_si512(bias + g, _mm512_mullo_epi32(_mm512_set1_epi32(-offset), sum));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + g), _mm512_cvtepi32_epi16(sum));
}

// The same for sub-blocks [g, g + 8) (32-element ones).
RADIX_AVX512 void StoreGroups(int32_t offset, float scale, __m256i sum, int64_t g, float* d,
                              float* s, int32_t* bias, int16_t* sums) {
  _mm256_storeu_ps(d + g, _mm256_set1_ps(scale));
  _mm256_storeu_ps(s + g, _mm256_mul_ps(_mm256_set1_ps(scale), _mm256_cvtepi32_ps(sum)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(bias + g),
                      _mm256_mullo_epi32(_mm256_set1_epi32(-offset), sum));
  // The sums fit 16 bits, so the saturating pack only narrows them.
  _mm_storeu_si128(reinterpret_cast<__m128i*>(sums + g),
                   _mm_packs_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1)));
}

RADIX_AVX512 void Row32(WeightFormat weight, int32_t offset, const float* x, int64_t subs,
                        int8_t* q, float* d, float* s, int32_t* bias, int16_t* sums) {
  const bool block_sums = ref::UsesBlockSums(weight);
  int64_t b = 0;
  for (; b + 16 <= subs; b += 16) {
    Row32Groups16(block_sums, offset, x + 32 * b, q + 32 * b, d + b, s + b, bias + b, sums + b);
  }
  for (; b < subs; ++b) {
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

// The largest and the smallest of 16 vectors' lanes, lane by lane (trees: four dependent steps,
// not sixteen).
[[gnu::always_inline]] RADIX_AVX512 inline void MinMaxTree16(const __m512* v, __m512* smallest,
                                                             __m512* largest) {
  __m512 lo[8], hi[8];
  for (int i = 0; i < 8; ++i) {
    lo[i] = _mm512_min_ps(v[i], v[i + 8]);
    hi[i] = _mm512_max_ps(v[i], v[i + 8]);
  }
  for (int i = 0; i < 4; ++i) {
    lo[i] = _mm512_min_ps(lo[i], lo[i + 4]);
    hi[i] = _mm512_max_ps(hi[i], hi[i + 4]);
  }
  *smallest = _mm512_min_ps(_mm512_min_ps(lo[0], lo[2]), _mm512_min_ps(lo[1], lo[3]));
  *largest = _mm512_max_ps(_mm512_max_ps(hi[0], hi[2]), _mm512_max_ps(hi[1], hi[3]));
}

// The first of the 256 values at x of the largest magnitude, as the scalar scan picks it (zero
// when all are): the one of that magnitude unless both signs reach it.
RADIX_AVX512 float FirstLargest(const float* x) {
  __m512 xv[16];
  for (int i = 0; i < 16; ++i) xv[i] = _mm512_loadu_ps(x + 16 * i);
  __m512 smallest, largest;
  MinMaxTree16(xv, &smallest, &largest);
  const float top = _mm512_reduce_max_ps(largest), bottom = _mm512_reduce_min_ps(smallest);
  const float amax = std::max(top, -bottom);
  if (amax == 0.0f) return 0.0f;
  if (top != -bottom) return top == amax ? top : bottom;
  const __m512 vamax = _mm512_set1_ps(amax);
  for (int i = 0;; ++i) {
    const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(xv[i]), vamax, _CMP_EQ_OQ);
    if (hit != 0) return x[16 * i + __builtin_ctz(hit)];
  }
}

// One 256-block at x quantized by iscale (its scale 1 / iscale): codes at q, and its sub-blocks
// [first, first + 256 / sub).
RADIX_AVX512 void BlockK(int32_t offset, const float* x, float iscale, float scale, int64_t sub,
                         int8_t* q, int64_t first, float* d, float* s, int32_t* bias,
                         int16_t* sums) {
  const __m512 viscale = _mm512_set1_ps(iscale);
  const __m512i cap = _mm512_set1_epi32(127);
  __m512i v[16];
  for (int i = 0; i < 16; ++i) {
    v[i] = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * i), viscale)),
                            cap);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * i), _mm512_cvtepi32_epi8(v[i]));
  }
  // The sums of 16 codes; a sub-block of 32 adds neighbouring pairs (the low half of each 64-bit
  // lane after the shift).
  const __m512i sums16 = LaneReduce16<false>(v);
  if (sub == 16) {
    StoreGroups(offset, scale, sums16, first, d, s, bias, sums);
  } else {
    const __m512i pairs = _mm512_add_epi32(sums16, _mm512_srli_epi64(sums16, 32));
    StoreGroups(offset, scale, _mm512_cvtepi64_epi32(pairs), first, d, s, bias, sums);
  }
}

// A run of 16 blocks' scales (QuantizeRowKInRuns): iscale = -127 / max, scale = 1 / iscale.
RADIX_AVX512 void RunScales(const float* max, float* iscale, float* scale) {
  const __m512 vmax = _mm512_load_ps(max);
  const __mmask16 nonzero = _mm512_cmp_ps_mask(vmax, _mm512_setzero_ps(), _CMP_NEQ_UQ);
  const __m512 viscale = _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(-127.0f), vmax);
  _mm512_store_ps(iscale, viscale);
  _mm512_store_ps(scale, _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0f), viscale));
}

RADIX_AVX512 void RowK(int32_t offset, const float* x, int64_t cols, int64_t sub, int8_t* q,
                       float* d, float* s, int32_t* bias, int16_t* sums) {
  QuantizeRowKInRuns<16>(offset, x, cols, sub, q, d, s, bias, sums, FirstLargest, RunScales,
                         BlockK);
}

}  // namespace

RADIX_AVX512 void QuantizeActivationRowsAvx512(WeightFormat weight, int32_t offset, const float* x,
                                               int64_t begin, int64_t end,
                                               ref::QuantizedActivations* out) {
  QuantizeRowsWith(weight, offset, x, begin, end, out, RowK, Row32);
}

}  // namespace radixserve::kernels::x86

// AVX-512 (F + DQ) variants of the KernelTable primitives; tails use masked loads and stores.
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized on its own _mm512_undefined_ps() helpers
// when inlined into masked intrinsics; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/kernel_table.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels::x86 {
namespace {

RADIX_AVX512 __mmask16 TailMask(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xFFFF)
                         : static_cast<__mmask16>((1u << remaining) - 1u);
}

RADIX_AVX512 float Dot(const float* a, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

RADIX_AVX512 void Axpy(float alpha, const float* x, float* y, int64_t n) {
  const __m512 va = _mm512_set1_ps(alpha);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    __m512 r =
        _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i));
    _mm512_mask_storeu_ps(y + i, m, r);
  }
}

// 16 halves or bfloat16s as floats; `count` < 16 loads that many and zeros (a tail: copied into
// a zeroed buffer, as masked 16-bit loads would need AVX512BW).
struct LoadF16 {
  RADIX_AVX512 __m512 operator()(const uint16_t* h) const {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
  }
};
struct LoadBf16 {
  RADIX_AVX512 __m512 operator()(const uint16_t* h) const {
    const __m512i wide =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
};
template <typename Load>
RADIX_AVX512 __m512 LoadPart(const uint16_t* h, int64_t count) {
  if (count >= 16) return Load()(h);
  alignas(32) uint16_t tail[16] = {};
  for (int64_t k = 0; k < count; ++k) tail[k] = h[k];
  return Load()(tail);
}

// Dot with the 16-bit operand converted on load: the same accumulators and order as Dot.
template <typename Load>
RADIX_AVX512 float DotHalf(const uint16_t* h, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(Load()(h + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(Load()(h + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    acc0 = _mm512_fmadd_ps(LoadPart<Load>(h + i, n - i), _mm512_maskz_loadu_ps(m, b + i), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

template <typename Load>
RADIX_AVX512 void AxpyHalf(float alpha, const uint16_t* h, float* y, int64_t n) {
  const __m512 va = _mm512_set1_ps(alpha);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    __m512 r = _mm512_fmadd_ps(va, LoadPart<Load>(h + i, n - i), _mm512_maskz_loadu_ps(m, y + i));
    _mm512_mask_storeu_ps(y + i, m, r);
  }
}

// Sum of the f32 squares x[i] * x[i], accumulated in f64 (as llama.cpp's rms_norm does, so the
// rounded mean is the same float whatever the summation order).
RADIX_AVX512 double SumSquaresF64(const float* x, int64_t n) {
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(TailMask(n - i), x + i);
    const __m512 sq = _mm512_mul_ps(v, v);
    acc0 = _mm512_add_pd(acc0, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
    acc1 = _mm512_add_pd(
        acc1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sq), 1))));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
}

RADIX_AVX512 void RmsNorm(const float* x, const float* w, float weight_offset, float eps, float* y,
                          int64_t n) {
  const float mean =
      n > 0 ? static_cast<float>(SumSquaresF64(x, n) / static_cast<double>(n)) : 0.0f;
  const __m512 vinv = _mm512_set1_ps(1.0f / std::sqrt(mean + eps));
  const __m512 voff = _mm512_set1_ps(weight_offset);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    __m512 scale = _mm512_add_ps(voff, _mm512_maskz_loadu_ps(m, w + i));
    __m512 r = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vinv), scale);
    _mm512_mask_storeu_ps(y + i, m, r);
  }
}

RADIX_AVX512 void Softmax(float* x, int64_t n) {
  if (n == 0) return;
  __m512 vmax = _mm512_set1_ps(x[0]);
  for (int64_t i = 0; i < n; i += 16) {
    vmax = _mm512_mask_max_ps(vmax, TailMask(n - i), vmax,
                              _mm512_maskz_loadu_ps(TailMask(n - i), x + i));
  }
  const __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    __m512 e = Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vm));
    e = _mm512_maskz_mov_ps(m, e);
    _mm512_mask_storeu_ps(x + i, m, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  const __m512 vinv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vinv));
  }
}

RADIX_AVX512 void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    __m512 e = Exp(_mm512_sub_ps(_mm512_setzero_ps(), g));
    __m512 s = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

RADIX_AVX512 void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    __m512 g3 = _mm512_mul_ps(_mm512_mul_ps(g, g), g);
    __m512 inner = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f),
                                 _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), g3, g));
    __m512 e = Exp(_mm512_mul_ps(two, inner));
    __m512 one_plus_tanh = _mm512_sub_ps(two, _mm512_div_ps(two, _mm512_add_ps(e, one)));
    __m512 r = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), g), one_plus_tanh);
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(r, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

// 1 + erf(z) by Abramowitz & Stegun 7.1.26, as in the AVX2 variant.
RADIX_AVX512 __m512 OnePlusErf(__m512 z) {
  const __m512 a = _mm512_abs_ps(z);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), a, one));
  __m512 p = _mm512_set1_ps(1.061405429f);
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
  const __m512 q = _mm512_mul_ps(_mm512_mul_ps(p, t),
                                 Exp(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), a), a)));
  const __mmask16 negative = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_blend_ps(negative, _mm512_sub_ps(_mm512_set1_ps(2.0f), q), q);
}

RADIX_AVX512 void GeluErf(const float* x, float* out, int64_t n) {
  const __m512 half = _mm512_set1_ps(0.5f), inv_sqrt2 = _mm512_set1_ps(0.70710678118654752f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 e = OnePlusErf(_mm512_mul_ps(v, inv_sqrt2));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_mul_ps(half, v), e));
  }
}

RADIX_AVX512 int64_t Argmax(const float* x, int64_t n) {
  // The largest first (max_ps returns its second operand when the first is NaN), then its first
  // position.
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    vmax = _mm512_mask_max_ps(vmax, m, _mm512_maskz_loadu_ps(m, x + i), vmax);
  }
  const __m512 best = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    const unsigned hits = _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(m, x + i), best, _CMP_EQ_OQ) & m;
    if (hits != 0) return i + __builtin_ctz(hits);
  }
  return -1;
}

RADIX_AVX512 void ExpBlocks(const float* x, float scale, float shift, float* out, float* block_sum,
                            float* block_max, int64_t n) {
  const __m512 vscale = _mm512_set1_ps(scale), vshift = _mm512_set1_ps(shift);
  const __m512 floor = _mm512_set1_ps(-87.0f);
  for (int64_t begin = 0; begin < n; begin += kExpBlock) {
    const int64_t end = std::min(n, begin + kExpBlock);
    __m512 vsum = _mm512_setzero_ps(), vmax = _mm512_setzero_ps();
    for (int64_t i = begin; i < end; i += 16) {
      const __mmask16 m = TailMask(end - i);
      const __m512 v =
          _mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vscale), vshift);
      const __mmask16 live = _mm512_cmp_ps_mask(v, floor, _CMP_GE_OQ) & m;
      const __m512 e = _mm512_maskz_mov_ps(live, Exp(v));
      _mm512_mask_storeu_ps(out + i, m, e);
      vsum = _mm512_add_ps(vsum, e);
      vmax = _mm512_max_ps(vmax, e);
    }
    block_sum[begin / kExpBlock] = _mm512_reduce_add_ps(vsum);
    block_max[begin / kExpBlock] = _mm512_reduce_max_ps(vmax);
  }
}

RADIX_AVX512 float SumAtLeast(const float* x, int64_t n, float tau, int64_t* count) {
  const __m512 vtau = _mm512_set1_ps(tau);
  __m512 vsum = _mm512_setzero_ps();
  int64_t c = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __mmask16 in = _mm512_cmp_ps_mask(v, vtau, _CMP_GE_OQ) & m;
    vsum = _mm512_mask_add_ps(vsum, in, vsum, v);
    c += __builtin_popcount(static_cast<unsigned>(in));
  }
  *count = c;
  return _mm512_reduce_add_ps(vsum);
}

RADIX_AVX512 int64_t GatherAtLeast(const float* x, int64_t n, float tau, int32_t first,
                                   int32_t* ids) {
  const __m512 vtau = _mm512_set1_ps(tau);
  int64_t count = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    unsigned in = _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(m, x + i), vtau, _CMP_GE_OQ) & m;
    for (; in != 0; in &= in - 1) {
      ids[count++] = first + static_cast<int32_t>(i + __builtin_ctz(in));
    }
  }
  return count;
}

}  // namespace

const KernelTable& Avx512Table() {
  static const KernelTable table{"avx512",
                                 Dot,
                                 Axpy,
                                 RmsNorm,
                                 Softmax,
                                 SiluMul,
                                 GeluTanhMul,
                                 GeluErf,
                                 DotHalf<LoadF16>,
                                 DotHalf<LoadBf16>,
                                 AxpyHalf<LoadF16>,
                                 AxpyHalf<LoadBf16>,
                                 Argmax,
                                 ExpBlocks,
                                 SumAtLeast,
                                 GatherAtLeast};
  return table;
}

}  // namespace radixserve::kernels::x86

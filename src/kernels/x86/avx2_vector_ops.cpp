// AVX2 + FMA variants of the KernelTable primitives. Each function carries the target attribute,
// so this file compiles without -mavx2 and is only called after a CPUID check.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/half.h"
#include "kernels/kernel_table.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels::x86 {
namespace {

RADIX_AVX2 float HorizontalSum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_hadd_ps(lo, lo);
  lo = _mm_hadd_ps(lo, lo);
  return _mm_cvtss_f32(lo);
}

RADIX_AVX2 float Dot(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  }
  float sum = HorizontalSum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

RADIX_AVX2 void Axpy(float alpha, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += alpha * x[i];
}

// 8 halves or bfloat16s as floats.
struct LoadF16 {
  RADIX_AVX2 __m256 operator()(const uint16_t* h) const {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
  }
  static float One(uint16_t h) { return F16ToF32(h); }
};
struct LoadBf16 {
  RADIX_AVX2 __m256 operator()(const uint16_t* h) const {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float One(uint16_t h) { return Bf16ToF32(h); }
};

// Dot with the 16-bit operand converted on load: the same accumulators and order as Dot.
template <typename Load>
RADIX_AVX2 float DotHalf(const uint16_t* h, const float* b, int64_t n) {
  const Load load;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(load(h + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(load(h + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(load(h + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(load(h + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load(h + i), _mm256_loadu_ps(b + i), acc0);
  float sum = HorizontalSum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < n; ++i) sum += Load::One(h[i]) * b[i];
  return sum;
}

template <typename Load>
RADIX_AVX2 void AxpyHalf(float alpha, const uint16_t* h, float* y, int64_t n) {
  const Load load;
  const __m256 va = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load(h + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += alpha * Load::One(h[i]);
}

// Sum of the f32 squares x[i] * x[i], accumulated in f64 (as llama.cpp's rms_norm does).
RADIX_AVX2 double SumSquaresF64(const float* x, int64_t n) {
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 sq = _mm256_mul_ps(v, v);
    acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(acc0, acc1));
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

RADIX_AVX2 void RmsNorm(const float* x, const float* w, float weight_offset, float eps, float* y,
                        int64_t n) {
  const float mean =
      n > 0 ? static_cast<float>(SumSquaresF64(x, n) / static_cast<double>(n)) : 0.0f;
  const float inv = 1.0f / std::sqrt(mean + eps);
  const __m256 vinv = _mm256_set1_ps(inv), voff = _mm256_set1_ps(weight_offset);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 scale = _mm256_add_ps(voff, _mm256_loadu_ps(w + i));
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv), scale));
  }
  for (; i < n; ++i) y[i] = x[i] * inv * (weight_offset + w[i]);
}

RADIX_AVX2 void Softmax(float* x, int64_t n) {
  if (n == 0) return;
  __m256 vmax = _mm256_set1_ps(x[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  float max = Max8(vmax);
  for (; i < n; ++i) max = std::fmax(max, x[i]);
  const __m256 vm = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = HorizontalSum(vsum);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  const __m256 vinv = _mm256_set1_ps(inv);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
  for (; i < n; ++i) x[i] *= inv;
}

RADIX_AVX2 void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 g = _mm256_loadu_ps(gate + i);
    __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), g));
    __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

RADIX_AVX2 void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 g = _mm256_loadu_ps(gate + i);
    __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    __m256 inner = _mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi),
                                 _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), g3, g));
    // 1 + tanh(u) = 2 - 2 / (exp(2u) + 1)
    __m256 e = Exp(_mm256_mul_ps(two, inner));
    __m256 one_plus_tanh = _mm256_sub_ps(two, _mm256_div_ps(two, _mm256_add_ps(e, one)));
    __m256 r = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), g), one_plus_tanh);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(r, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    const float inner = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    out[i] = 0.5f * g * (1.0f + std::tanh(inner)) * up[i];
  }
}

// 1 + erf(z) for the exact GELU, by Abramowitz & Stegun 7.1.26: with a = |z| and
// t = 1 / (1 + p a), q = t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-a^2) = 1 - erf(a). Taking
// q itself for z < 0 (and 2 - q otherwise) keeps the GELU of large negative inputs accurate.
RADIX_AVX2 __m256 OnePlusErf(__m256 z) {
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, one));
  __m256 p = _mm256_set1_ps(1.061405429f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
  const __m256 q = _mm256_mul_ps(_mm256_mul_ps(p, t),
                                 Exp(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), a), a)));
  const __m256 negative = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ);
  return _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), q), q, negative);
}

RADIX_AVX2 void GeluErf(const float* x, float* out, int64_t n) {
  const __m256 half = _mm256_set1_ps(0.5f), inv_sqrt2 = _mm256_set1_ps(0.70710678118654752f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 e = OnePlusErf(_mm256_mul_ps(v, inv_sqrt2));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(half, v), e));
  }
  if (i < n) {
    alignas(32) float tail[8] = {};
    for (int64_t k = i; k < n; ++k) tail[k - i] = x[k];
    const __m256 v = _mm256_load_ps(tail);
    _mm256_store_ps(tail,
                    _mm256_mul_ps(_mm256_mul_ps(half, v), OnePlusErf(_mm256_mul_ps(v, inv_sqrt2))));
    for (int64_t k = i; k < n; ++k) out[k] = tail[k - i];
  }
}

RADIX_AVX2 int64_t Argmax(const float* x, int64_t n) {
  // The largest first (max_ps returns its second operand when the first is NaN), then its first
  // position.
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(_mm256_loadu_ps(x + i), vmax);
  float max = Max8(vmax);
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  const __m256 best = _mm256_set1_ps(max);
  for (i = 0; i + 8 <= n; i += 8) {
    const int hits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), best, _CMP_EQ_OQ));
    if (hits != 0) return i + __builtin_ctz(static_cast<unsigned>(hits));
  }
  for (; i < n; ++i) {
    if (x[i] == max) return i;
  }
  return -1;
}

// Eight values from x[i, i + live) into a vector, `pad` in the lanes past them.
RADIX_AVX2 __m256 LoadFirstLanes(const float* x, int64_t live, float pad) {
  if (live >= 8) return _mm256_loadu_ps(x);
  alignas(32) float lanes[8] = {pad, pad, pad, pad, pad, pad, pad, pad};
  for (int64_t k = 0; k < live; ++k) lanes[k] = x[k];
  return _mm256_load_ps(lanes);
}

RADIX_AVX2 void ExpBlocks(const float* x, float scale, float shift, float* out, float* block_sum,
                          float* block_max, int64_t n) {
  const __m256 vscale = _mm256_set1_ps(scale), vshift = _mm256_set1_ps(shift);
  const __m256 floor = _mm256_set1_ps(-87.0f);
  for (int64_t begin = 0; begin < n; begin += kExpBlock) {
    const int64_t end = std::min(n, begin + kExpBlock);
    __m256 vsum = _mm256_setzero_ps(), vmax = _mm256_setzero_ps();
    for (int64_t i = begin; i < end; i += 8) {
      // Lanes past the end hold -inf, whose exponential is 0.
      const __m256 v =
          _mm256_sub_ps(_mm256_mul_ps(LoadFirstLanes(x + i, end - i, -INFINITY), vscale), vshift);
      const __m256 e = _mm256_and_ps(Exp(v), _mm256_cmp_ps(v, floor, _CMP_GE_OQ));
      StoreFirstLanes(out + i, e, end - i);
      vsum = _mm256_add_ps(vsum, e);
      vmax = _mm256_max_ps(vmax, e);
    }
    block_sum[begin / kExpBlock] = HorizontalSum(vsum);
    block_max[begin / kExpBlock] = Max8(vmax);
  }
}

RADIX_AVX2 float SumAtLeast(const float* x, int64_t n, float tau, int64_t* count) {
  const __m256 vtau = _mm256_set1_ps(tau);
  __m256 vsum = _mm256_setzero_ps();
  int64_t c = 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 in = _mm256_cmp_ps(v, vtau, _CMP_GE_OQ);
    vsum = _mm256_add_ps(vsum, _mm256_and_ps(v, in));
    c += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(in)));
  }
  float sum = HorizontalSum(vsum);
  for (; i < n; ++i) {
    if (x[i] >= tau) {
      sum += x[i];
      ++c;
    }
  }
  *count = c;
  return sum;
}

RADIX_AVX2 int64_t GatherAtLeast(const float* x, int64_t n, float tau, int32_t first,
                                 int32_t* ids) {
  const __m256 vtau = _mm256_set1_ps(tau);
  int64_t count = 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    auto in = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vtau, _CMP_GE_OQ)));
    for (; in != 0; in &= in - 1) {
      ids[count++] = first + static_cast<int32_t>(i + __builtin_ctz(in));
    }
  }
  for (; i < n; ++i) {
    if (x[i] >= tau) ids[count++] = first + static_cast<int32_t>(i);
  }
  return count;
}

}  // namespace

const KernelTable& Avx2Table() {
  static const KernelTable table{"avx2",
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

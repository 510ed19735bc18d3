// AVX-512 float GEMM: 4x4 register tiles of (weight row, token) accumulators, each a 16-lane f32
// vector summed over the columns in order and reduced once at the end, so a result never depends
// on the tile it was computed in. BF16 x BF16 uses AVX512-BF16 dot products (32 columns per step).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "common/check.h"
#include "kernels/float_matmul.h"
#include "kernels/x86/simd.h"
#include "kernels/x86/token_tiles.h"

namespace radixserve::kernels::x86 {
namespace {

RADIX_AVX512 inline __mmask16 Mask16(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xFFFF)
                         : static_cast<__mmask16>((1u << remaining) - 1u);
}

template <WeightFormat F>
RADIX_AVX512 inline __m512 LoadW(const void* row, int64_t c) {
  if constexpr (F == WeightFormat::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(row) + c);
  } else {
    const __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + c));
    if constexpr (F == WeightFormat::kBF16) {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      return _mm512_cvtph_ps(h);
    }
  }
}

template <WeightFormat F>
RADIX_AVX512 inline __m512 LoadWMasked(const void* row, int64_t c, __mmask16 m) {
  if constexpr (F == WeightFormat::kF32) {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(row) + c);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(row) + c);
    if constexpr (F == WeightFormat::kBF16) {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      return _mm512_cvtph_ps(h);
    }
  }
}

// y[t * ldy + r] = lane sum of acc[r][t].
template <int R, int T>
RADIX_AVX512 inline void StoreTile(const __m512 (&acc)[R][T], float* y, int64_t ldy) {
  if constexpr (R == 4) {
    for (int t = 0; t < T; ++t) {
      _mm_storeu_ps(y + t * ldy, Reduce4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
    }
  } else {
    const __m512 zero = _mm512_setzero_ps();
    for (int r = 0; r < R; ++r) {
      alignas(16) float sums[4];
      _mm_store_ps(sums, Reduce4(acc[r][0], T > 1 ? acc[r][T > 1 ? 1 : 0] : zero,
                                 T > 2 ? acc[r][T > 2 ? 2 : 0] : zero,
                                 T > 3 ? acc[r][T > 3 ? 3 : 0] : zero));
      for (int t = 0; t < T; ++t) y[t * ldy + r] = sums[t];
    }
  }
}

template <WeightFormat F, int R, int T>
RADIX_AVX512 void Tile(const float* x, int64_t ldx, const uint8_t* w, int64_t w_stride,
                       int64_t cols, float* y, int64_t ldy) {
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = LoadW<F>(w + r * w_stride, c);
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_loadu_ps(x + t * ldx + c);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (c < cols) {
    const __mmask16 m = Mask16(cols - c);
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = LoadWMasked<F>(w + r * w_stride, c, m);
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * ldx + c);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  StoreTile<R, T>(acc, y, ldy);
}

template <WeightFormat F, int R>
RADIX_AVX512 void RowBlock(const float* x, int64_t ldx, int64_t n, const uint8_t* w,
                           int64_t w_stride, int64_t cols, float* y, int64_t ldy) {
  ForEachTokenTile(n, [&](auto tokens, int64_t t) {
    Tile<F, R, decltype(tokens)::value>(x + t * ldx, ldx, w, w_stride, cols, y + t * ldy, ldy);
  });
}

template <WeightFormat F>
RADIX_AVX512 void GemmAs(const float* x, int64_t ldx, int64_t n, const void* w, int64_t w_stride,
                         int64_t cols, int64_t r_begin, int64_t r_end, float* y, int64_t ldy) {
  const auto* base = static_cast<const uint8_t*>(w);
  int64_t r = r_begin;
  for (; r + 4 <= r_end; r += 4) {
    RowBlock<F, 4>(x, ldx, n, base + r * w_stride, w_stride, cols, y + r, ldy);
  }
  for (; r < r_end; ++r) RowBlock<F, 1>(x, ldx, n, base + r * w_stride, w_stride, cols, y + r, ldy);
}

void Gemm(const float* x, int64_t ldx, int64_t n, const void* w, WeightFormat format,
          int64_t w_stride, int64_t cols, int64_t r_begin, int64_t r_end, float* y, int64_t ldy) {
  switch (format) {
    case WeightFormat::kF32:
      return GemmAs<WeightFormat::kF32>(x, ldx, n, w, w_stride, cols, r_begin, r_end, y, ldy);
    case WeightFormat::kBF16:
      return GemmAs<WeightFormat::kBF16>(x, ldx, n, w, w_stride, cols, r_begin, r_end, y, ldy);
    case WeightFormat::kF16:
      return GemmAs<WeightFormat::kF16>(x, ldx, n, w, w_stride, cols, r_begin, r_end, y, ldy);
    default:
      RADIX_CHECK_MSG(false, "not a float weight format");
  }
}

template <int R, int T>
RADIX_AVX512_BF16 void TileBf16(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t w_stride,
                                int64_t cols, float* y, int64_t ldy) {
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t c = 0;
  for (; c + 32 <= cols; c += 32) {
    __m512bh wv[R];
    for (int r = 0; r < R; ++r) wv[r] = (__m512bh)_mm512_loadu_si512(w + r * w_stride + c);
    for (int t = 0; t < T; ++t) {
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(x + t * ldx + c);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv);
    }
  }
  if (c < cols) {
    const int64_t rest = cols - c;
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << rest) - 1u);
    __m512bh wv[R];
    for (int r = 0; r < R; ++r) wv[r] = (__m512bh)_mm512_maskz_loadu_epi16(m, w + r * w_stride + c);
    for (int t = 0; t < T; ++t) {
      const __m512bh xv = (__m512bh)_mm512_maskz_loadu_epi16(m, x + t * ldx + c);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv);
    }
  }
  StoreTile<R, T>(acc, y, ldy);
}

template <int R>
RADIX_AVX512_BF16 void RowBlockBf16(const uint16_t* x, int64_t ldx, int64_t n, const uint16_t* w,
                                    int64_t w_stride, int64_t cols, float* y, int64_t ldy) {
  ForEachTokenTile(n, [&](auto tokens, int64_t t) {
    TileBf16<R, decltype(tokens)::value>(x + t * ldx, ldx, w, w_stride, cols, y + t * ldy, ldy);
  });
}

RADIX_AVX512_BF16 void GemmBf16(const uint16_t* x, int64_t ldx, int64_t n, const uint16_t* w,
                                int64_t w_stride, int64_t cols, int64_t r_begin, int64_t r_end,
                                float* y, int64_t ldy) {
  int64_t r = r_begin;
  for (; r + 4 <= r_end; r += 4) {
    RowBlockBf16<4>(x, ldx, n, w + r * w_stride, w_stride, cols, y + r, ldy);
  }
  for (; r < r_end; ++r) RowBlockBf16<1>(x, ldx, n, w + r * w_stride, w_stride, cols, y + r, ldy);
}

// F32 panels (float_matmul.h): acc[t][p] holds rows [16(p0 + p), +16) of token t, one fma per
// column in order. RP panels x NT tokens, RP * NT <= 24 accumulators.
template <int RP, int NT>
RADIX_AVX512 void PanelTile(const float* x, int64_t ldx, const float* panel, int64_t cols,
                            int64_t live_rows, float* y, int64_t ldy) {
  __m512 acc[NT][RP];
  for (int t = 0; t < NT; ++t)
    for (int p = 0; p < RP; ++p) acc[t][p] = _mm512_setzero_ps();
  const int64_t stride = kF32PanelRows * cols;
  // The loops over panels and tokens are unrolled whole, so the accumulators stay in registers:
  // left to GCC, it kept them in stack slots it rewrote every column (one store per fused
  // multiply-add in PanelTile<4, 6>, <3, 8> and <2, 12>).
#pragma GCC unroll 2
  for (int64_t c = 0; c < cols; ++c) {
    __m512 wv[RP];
#pragma GCC unroll 4
    for (int p = 0; p < RP; ++p) wv[p] = _mm512_loadu_ps(panel + p * stride + c * kF32PanelRows);
#pragma GCC unroll 12
    for (int t = 0; t < NT; ++t) {
      const __m512 xb = _mm512_set1_ps(x[t * ldx + c]);
#pragma GCC unroll 4
      for (int p = 0; p < RP; ++p) acc[t][p] = _mm512_fmadd_ps(wv[p], xb, acc[t][p]);
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < RP; ++p) {
    const int64_t live = live_rows - p * kF32PanelRows;
    const __mmask16 m = Mask16(live);
#pragma GCC unroll 12
    for (int t = 0; t < NT; ++t)
      _mm512_mask_storeu_ps(y + t * ldy + p * kF32PanelRows, m, acc[t][p]);
  }
}

// Token tiles of 6 (4 panels), 8 (3) or 12 (1-2), then one tile of what is left.
template <int RP>
RADIX_AVX512 void PanelRowBlock(const float* x, int64_t ldx, int64_t n, const float* panel,
                                int64_t cols, int64_t live_rows, float* y, int64_t ldy) {
  constexpr int kTile = RP == 4 ? 6 : RP == 3 ? 8 : 12;
  ForEachTokenTileOf<kTile>(n, [&](auto tokens, int64_t t) {
    PanelTile<RP, decltype(tokens)::value>(x + t * ldx, ldx, panel, cols, live_rows, y + t * ldy,
                                           ldy);
  });
}

template <int RP>
RADIX_AVX512 void PanelBlock(const float* x, int64_t ldx, int64_t n, const float* panels,
                             int64_t rows, int64_t cols, int64_t p, float* y, int64_t ldy) {
  const int64_t r0 = p * kF32PanelRows;
  PanelRowBlock<RP>(x, ldx, n, panels + r0 * cols, cols, rows - r0, y + r0, ldy);
}

RADIX_AVX512 void GemmF32Panels(const float* x, int64_t ldx, int64_t n, const float* panels,
                                int64_t rows, int64_t cols, int64_t p_begin, int64_t p_end,
                                float* y, int64_t ldy) {
  int64_t p = p_begin;
  for (; p + 4 <= p_end; p += 4) PanelBlock<4>(x, ldx, n, panels, rows, cols, p, y, ldy);
  switch (p_end - p) {
    case 3:
      return PanelBlock<3>(x, ldx, n, panels, rows, cols, p, y, ldy);
    case 2:
      return PanelBlock<2>(x, ldx, n, panels, rows, cols, p, y, ldy);
    case 1:
      return PanelBlock<1>(x, ldx, n, panels, rows, cols, p, y, ldy);
    default:
      return;
  }
}

// Round to nearest even on the bit pattern (NaNs stay NaN by keeping a mantissa bit).
RADIX_AVX512 inline __m512i Bf16Bits(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, bits, _mm512_set1_epi32(0x400000));
  return _mm512_srli_epi32(r, 16);
}

RADIX_AVX512 void RoundBf16(const float* x, float* out, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 m = Mask16(count - i);
    const __m512i b = Bf16Bits(_mm512_maskz_loadu_ps(m, x + i));
    _mm512_mask_storeu_ps(out + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(b, 16)));
  }
}

RADIX_AVX512 void RoundF16(const float* x, float* out, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 m = Mask16(count - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm512_mask_storeu_ps(out + i, m, _mm512_cvtph_ps(h));
  }
}

RADIX_AVX512 void ToBf16(const float* x, uint16_t* out, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 m = Mask16(count - i);
    const __m512i b = Bf16Bits(_mm512_maskz_loadu_ps(m, x + i));
    _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(b));
  }
}

}  // namespace

const FloatGemmKernels& Avx512FloatTable() {
  static const FloatGemmKernels table{
      "avx512", Gemm,         CpuHasAvx512Bf16() ? GemmBf16 : nullptr, RoundBf16, RoundF16,
      ToBf16,   GemmF32Panels};
  return table;
}

}  // namespace radixserve::kernels::x86

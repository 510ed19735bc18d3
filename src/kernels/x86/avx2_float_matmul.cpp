// AVX2 float GEMM: 3x4 register tiles of 8-lane f32 accumulators (weights widened with F16C or a
// shift for bf16). Column tails go through a zero-padded 8-element copy so every result keeps
// one summation order whatever tile it lands in.
#include <immintrin.h>

#include <cstring>

#include "common/check.h"
#include "kernels/float_matmul.h"
#include "kernels/half.h"
#include "kernels/x86/avx2_panel_tile.h"
#include "kernels/x86/simd.h"
#include "kernels/x86/token_tiles.h"

namespace radixserve::kernels::x86 {
namespace {

template <WeightFormat F>
RADIX_AVX2 inline __m256 LoadW(const void* row, int64_t c) {
  if constexpr (F == WeightFormat::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(row) + c);
  } else {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + c));
    if constexpr (F == WeightFormat::kBF16) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      return _mm256_cvtph_ps(h);
    }
  }
}

// Elements [c, cols) of a row, widened to f32 and zero-padded to 8.
template <WeightFormat F>
inline void TailW(const void* row, int64_t c, int64_t cols, float* out) {
  for (int i = 0; i < 8; ++i) {
    const int64_t k = c + i;
    float v = 0.0f;
    if (k < cols) {
      if constexpr (F == WeightFormat::kF32) {
        v = LoadUnaligned<float>(row, k);
      } else if constexpr (F == WeightFormat::kBF16) {
        v = Bf16ToF32(LoadUnaligned<uint16_t>(row, k));
      } else {
        v = F16ToF32(LoadUnaligned<uint16_t>(row, k));
      }
    }
    out[i] = v;
  }
}

template <WeightFormat F, int R, int T>
RADIX_AVX2 void Tile(const float* x, int64_t ldx, const uint8_t* w, int64_t w_stride, int64_t cols,
                     float* y, int64_t ldy) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = LoadW<F>(w + r * w_stride, c);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * ldx + c);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (c < cols) {
    alignas(32) float wt[R][8];
    alignas(32) float xt[8];
    for (int r = 0; r < R; ++r) TailW<F>(w + r * w_stride, c, cols, wt[r]);
    for (int t = 0; t < T; ++t) {
      std::memset(xt, 0, sizeof(xt));
      std::memcpy(xt, x + t * ldx + c, sizeof(float) * static_cast<size_t>(cols - c));
      const __m256 xv = _mm256_load_ps(xt);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(_mm256_load_ps(wt[r]), xv, acc[r][t]);
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[t * ldy + r] = Sum8(acc[r][t]);
}

template <WeightFormat F, int R>
RADIX_AVX2 void RowBlock(const float* x, int64_t ldx, int64_t n, const uint8_t* w, int64_t w_stride,
                         int64_t cols, float* y, int64_t ldy) {
  ForEachTokenTile(n, [&](auto tokens, int64_t t) {
    Tile<F, R, decltype(tokens)::value>(x + t * ldx, ldx, w, w_stride, cols, y + t * ldy, ldy);
  });
}

// Tiles of 3 weight rows x 4 tokens: 12 accumulators, 3 weight vectors and one activation vector
// fill the 16 ymm registers exactly (a 4x4 tile spilled accumulators to the stack on every
// column step). A range whose length leaves one row over ends in two 2-row blocks instead. Every
// tile shape sums a result in the same order, so the choice never changes a bit.
template <WeightFormat F>
RADIX_AVX2 void GemmAs(const float* x, int64_t ldx, int64_t n, const void* w, int64_t w_stride,
                       int64_t cols, int64_t r_begin, int64_t r_end, float* y, int64_t ldy) {
  const auto* base = static_cast<const uint8_t*>(w);
  int64_t r = r_begin;
  if (n <= 2) {  // decode: 4 rows per pass keep more weight streams in flight, no spill at T <= 2
    for (; r + 4 <= r_end; r += 4) {
      RowBlock<F, 4>(x, ldx, n, base + r * w_stride, w_stride, cols, y + r, ldy);
    }
  }
  while (r < r_end) {
    const int64_t left = r_end - r;
    if (left >= 3 && left != 4) {
      RowBlock<F, 3>(x, ldx, n, base + r * w_stride, w_stride, cols, y + r, ldy);
      r += 3;
    } else if (left >= 2) {
      RowBlock<F, 2>(x, ldx, n, base + r * w_stride, w_stride, cols, y + r, ldy);
      r += 2;
    } else {
      RowBlock<F, 1>(x, ldx, n, base + r * w_stride, w_stride, cols, y + r, ldy);
      r += 1;
    }
  }
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

RADIX_AVX2 inline __m256i Bf16Bits(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256i quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x400000));
  return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, nan), 16);
}

RADIX_AVX2 void RoundBf16(const float* x, float* out, int64_t count) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256i b = Bf16Bits(_mm256_loadu_ps(x + i));
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(b, 16)));
  }
  for (; i < count; ++i) out[i] = Bf16ToF32(F32ToBf16(x[i]));
}

RADIX_AVX2 void RoundF16(const float* x, float* out, int64_t count) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < count; ++i) out[i] = F16ToF32(F32ToF16(x[i]));
}

void ToBf16(const float* x, uint16_t* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = F32ToBf16(x[i]);
}

// F32 panels (float_matmul.h): avx2_panel_tile.h's tiles over each panel, from zero.
RADIX_AVX2 void GemmF32Panels(const float* x, int64_t ldx, int64_t n, const float* panels,
                              int64_t rows, int64_t cols, int64_t p_begin, int64_t p_end, float* y,
                              int64_t ldy) {
  for (int64_t p = p_begin; p < p_end; ++p) {
    const int64_t r0 = p * kF32PanelRows;
    PanelTokens(x, ldx, 0, n, panels + r0 * cols, cols, rows - r0, nullptr, 0, y + r0, ldy);
  }
}

}  // namespace

const FloatGemmKernels& Avx2FloatTable() {
  static const FloatGemmKernels table{"avx2",   Gemm,   nullptr,      RoundBf16,
                                      RoundF16, ToBf16, GemmF32Panels};
  return table;
}

}  // namespace radixserve::kernels::x86

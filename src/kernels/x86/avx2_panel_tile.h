// The AVX2 tile over a panel of 16 rows already in f32 (float_matmul.h's F32 panel layout: the
// panel's 16 rows per column, 64 bytes): the F32 panels' GEMM multiplies with it directly and the
// BF16 panels (x86/avx2_bf16_panels.h) after widening a chunk of columns.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/float_matmul.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels::x86 {

// Tokens sharing each weight load: 2 x 6 accumulators, a column's two weight vectors and a
// broadcast activation fill 15 of the 16 ymm registers.
inline constexpr int kAvx2PanelTokens = 6;

// y[t, r] (row stride ldy) for T tokens and the panel's first `live_rows` rows: `cols` columns of
// `panel` times the activations x[t * ldx + c], one fused multiply-add per column in order, from
// zero when `sums` is null, else continuing the sums at sums[t * ld_sums + r] (the same bits as
// one pass; `sums` may be y itself).
template <int NT>
[[gnu::always_inline]] RADIX_AVX2 inline void PanelTile(const float* x, int64_t ldx,
                                                        const float* panel, int64_t cols,
                                                        int64_t live_rows, const float* sums,
                                                        int64_t ld_sums, float* y, int64_t ldy) {
  const int64_t live = std::min(live_rows, kF32PanelRows);
  __m256 lo[NT], hi[NT];
  for (int t = 0; t < NT; ++t) {
    if (sums == nullptr) {
      lo[t] = hi[t] = _mm256_setzero_ps();
    } else if (live == kF32PanelRows) {
      lo[t] = _mm256_loadu_ps(sums + t * ld_sums);
      hi[t] = _mm256_loadu_ps(sums + t * ld_sums + 8);
    } else {
      alignas(32) float in[kF32PanelRows] = {};
      std::memcpy(in, sums + t * ld_sums, sizeof(float) * static_cast<size_t>(live));
      lo[t] = _mm256_load_ps(in);
      hi[t] = _mm256_load_ps(in + 8);
    }
  }
#pragma GCC unroll 2
  for (int64_t c = 0; c < cols; ++c) {
    const __m256 w0 = _mm256_loadu_ps(panel + c * kF32PanelRows);
    const __m256 w1 = _mm256_loadu_ps(panel + c * kF32PanelRows + 8);
    for (int t = 0; t < NT; ++t) {
      const __m256 xb = _mm256_broadcast_ss(x + t * ldx + c);
      lo[t] = _mm256_fmadd_ps(w0, xb, lo[t]);
      hi[t] = _mm256_fmadd_ps(w1, xb, hi[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    if (live == kF32PanelRows) {
      _mm256_storeu_ps(y + t * ldy, lo[t]);
      _mm256_storeu_ps(y + t * ldy + 8, hi[t]);
    } else {
      alignas(32) float out[kF32PanelRows];
      _mm256_store_ps(out, lo[t]);
      _mm256_store_ps(out + 8, hi[t]);
      std::memcpy(y + t * ldy, out, sizeof(float) * static_cast<size_t>(live));
    }
  }
}

// PanelTile over tokens [0, n): tiles of kAvx2PanelTokens, then one of the rest. The tile must be
// inlined: out of line, GCC keeps its twelve accumulators on the stack (float_kernels_bench gemm
// with RADIX_KERNELS=avx2: 259 -> 125 GFLOP/s). So the tail's lambda carries the target itself
// (GCC does not give a lambda its enclosing function's), rather than going through
// ForEachTokenTileOf (token_tiles.h).
RADIX_AVX2 inline void PanelTokens(const float* x, int64_t ldx, int64_t n, const float* panel,
                                   int64_t cols, int64_t live_rows, const float* sums,
                                   int64_t ld_sums, float* y, int64_t ldy) {
  const auto sums_at = [&](int64_t t) { return sums == nullptr ? nullptr : sums + t * ld_sums; };
  int64_t t = 0;
  for (; t + kAvx2PanelTokens <= n; t += kAvx2PanelTokens) {
    PanelTile<kAvx2PanelTokens>(x + t * ldx, ldx, panel, cols, live_rows, sums_at(t), ld_sums,
                                y + t * ldy, ldy);
  }
  const int64_t rest = n - t;
  [&]<int... I>(std::integer_sequence<int, I...>) RADIX_AVX2 {
    ((rest == I + 1 ? PanelTile<I + 1>(x + t * ldx, ldx, panel, cols, live_rows, sums_at(t),
                                       ld_sums, y + t * ldy, ldy)
                    : void()),
     ...);
  }
  (std::make_integer_sequence<int, kAvx2PanelTokens - 1>{});
}

}  // namespace radixserve::kernels::x86

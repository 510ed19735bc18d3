// The AVX2 tile over a panel of 16 rows already in f32 (float_matmul.h's F32 panel layout: the
// panel's 16 rows per column, 64 bytes): the F32 panels' GEMM multiplies with it directly and the
// BF16 panels (x86/avx2_bf16_panels.h) after widening a chunk of columns.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/float_matmul.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels::x86 {

// Tokens sharing each weight load: 2 x 6 accumulators, a column's two weight vectors and a
// broadcast activation fill 15 of the 16 ymm registers.
inline constexpr int kAvx2PanelTokens = 6;

// y[t, r] (row stride ldy) for T tokens and the panel's first `live_rows` rows: `cols` columns of
// `panel` times the activations x[t * ldx + c] (kTokenMajor: x[c * NT + t], the tile's tokens of
// a column side by side, ldx unused), one fused multiply-add per column in order, from zero when
// `sums` is null, else continuing the sums at sums[t * ld_sums + r] (the same bits as one pass;
// `sums` may be y itself).
template <int NT, bool kTokenMajor = false>
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
      const __m256 xb = _mm256_broadcast_ss(kTokenMajor ? x + c * NT + t : x + t * ldx + c);
      lo[t] = _mm256_fmadd_ps(w0, xb, lo[t]);
      hi[t] = _mm256_fmadd_ps(w1, xb, hi[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    StoreFirstLanes(y + t * ldy, lo[t], live);
    StoreFirstLanes(y + t * ldy + 8, hi[t], live - 8);
  }
}

// PanelTile of 1 to kAvx2PanelTokens tokens. The tile must be inlined: out of line, GCC keeps its
// twelve accumulators on the stack (float_kernels_bench gemm with RADIX_KERNELS=avx2: 259 -> 125
// GFLOP/s), and inside a lambda it is not (GCC does not give a lambda its enclosing function's
// target), so this is a plain function rather than ForEachTokenTileOf (token_tiles.h), and it is
// forced inline: with two callers GCC made it one out-of-line copy (the F32 panels' GEMM stored
// every accumulator each column).
template <bool kTokenMajor = false>
[[gnu::always_inline]] RADIX_AVX2 inline void PanelTileOf(int64_t tokens, const float* x,
                                                          int64_t ldx, const float* panel,
                                                          int64_t cols, int64_t live_rows,
                                                          const float* sums, int64_t ld_sums,
                                                          float* y, int64_t ldy) {
  static_assert(kAvx2PanelTokens == 6);
  switch (tokens) {
    case 1:
      return PanelTile<1, kTokenMajor>(x, ldx, panel, cols, live_rows, sums, ld_sums, y, ldy);
    case 2:
      return PanelTile<2, kTokenMajor>(x, ldx, panel, cols, live_rows, sums, ld_sums, y, ldy);
    case 3:
      return PanelTile<3, kTokenMajor>(x, ldx, panel, cols, live_rows, sums, ld_sums, y, ldy);
    case 4:
      return PanelTile<4, kTokenMajor>(x, ldx, panel, cols, live_rows, sums, ld_sums, y, ldy);
    case 5:
      return PanelTile<5, kTokenMajor>(x, ldx, panel, cols, live_rows, sums, ld_sums, y, ldy);
    default:
      return PanelTile<6, kTokenMajor>(x, ldx, panel, cols, live_rows, sums, ld_sums, y, ldy);
  }
}

// The token tiles of a step of n tokens: tiles of kAvx2PanelTokens, then what is left. A tile of
// 1-3 tokens keeps 2-6 accumulator chains, too few to cover the fused multiply-add's latency on
// two pipes (8), so a rest of 1-3 and the last full tile run as two tiles of 4-5 instead (8
// tokens: 4 + 4, not 6 + 2). Returns the size of the tile that starts at token t.
inline int64_t PanelTileTokens(int64_t n, int64_t t) {
  const int64_t rest = n % kAvx2PanelTokens;
  const bool split = n > kAvx2PanelTokens && rest > 0 && rest < 4;
  const int64_t full = n - rest - (split ? kAvx2PanelTokens : 0);
  const int64_t left = n - full;
  const int64_t first_tail = split ? (left + 1) / 2 : left;
  return t < full ? kAvx2PanelTokens : t == full ? first_tail : n - t;
}

// PanelTile over tokens [0, n) in the tiles of PanelTileTokens, from column c0 of x: rows of
// stride ldx, or (kTokenMajor) as TokenMajorTiles laid them out with ldx values per token.
template <bool kTokenMajor = false>
RADIX_AVX2 inline void PanelTokens(const float* x, int64_t ldx, int64_t c0, int64_t n,
                                   const float* panel, int64_t cols, int64_t live_rows,
                                   const float* sums, int64_t ld_sums, float* y, int64_t ldy) {
  for (int64_t t = 0; t < n;) {
    const int64_t tokens = PanelTileTokens(n, t);
    PanelTileOf<kTokenMajor>(tokens, x + t * ldx + c0 * (kTokenMajor ? tokens : 1), ldx, panel,
                             cols, live_rows, sums == nullptr ? nullptr : sums + t * ld_sums,
                             ld_sums, y + t * ldy, ldy);
    t += tokens;
  }
}

// Tokens [0, n) of x (row stride ldx, `cols` values per row) rearranged token-major per tile of
// PanelTileTokens(n, .): the tile of T tokens at t takes the T rows' place, xt[t * cols + c * T +
// j] = x[(t + j) * ldx + c], so a tile's broadcasts of one column read T neighbouring floats
// instead of one float of each of T rows (which, rows a power of two apart, share an L1 set).
RADIX_AVX2 inline void TokenMajorTiles(const float* x, int64_t ldx, int64_t n, int64_t cols,
                                       float* xt) {
  for (int64_t t = 0; t < n;) {
    const int64_t tokens = PanelTileTokens(n, t);
    float* tile = xt + t * cols;
    for (int64_t j = 0; j < tokens; ++j) {
      const float* row = x + (t + j) * ldx;
      for (int64_t c = 0; c < cols; ++c) tile[c * tokens + j] = row[c];
    }
    t += tokens;
  }
}

}  // namespace radixserve::kernels::x86

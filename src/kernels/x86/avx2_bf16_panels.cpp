#include "kernels/x86/avx2_bf16_panels.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/x86/avx2_panel_tile.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels::x86 {
namespace {

constexpr int64_t kRows = 16;  // rows per panel (kernels/bf16_panels.h)
// How far ahead (in column pairs, one 64-byte line of a panel each) a panel is fetched.
constexpr int64_t kFetchPairs = 32;
// Panels sharing each broadcast activation in a step of at most 2 tokens (decode): more panel
// streams in flight.
constexpr int kDecodePanels = 3;
// Steps of kWideFromTokens tokens or more widen a panel to f32 once per kWidePairs column pairs
// (16 KB, kept in L1) and run every token tile over that (avx2_panel_tile.h), so the tiles issue
// fused multiply-adds and loads only; kWideGroup panels take each such chunk in turn, so a
// chunk's activations stay in L2 across them while their running sums (in y) do too.
// float_kernels_bench gemm-1b with 2 threads, 512 tokens: 173-176 GFLOP/s widening in the tiles
// (2 shifts and 2 masks per 24 multiply-adds) -> 186-191. Below that the widened chunk's stores
// cost more than they save: one thread on Zen 3, 6-24 tokens, 1.07-1.68x in registers (Tile).
constexpr int64_t kWideFromTokens = 32;
constexpr int64_t kWidePairs = 128;
constexpr int64_t kWideGroup = 8;

// A pair-vector's 8 rows widened to f32: the even columns (the low bf16 of each dword, shifted
// into the top half) and the odd ones (the high bf16, already in place once the low is masked).
RADIX_AVX2 inline __m256 EvenColumns(__m256i pairs) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16));
}
RADIX_AVX2 inline __m256 OddColumns(__m256i pairs) {
  return _mm256_castsi256_ps(
      _mm256_and_si256(pairs, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// Tokens [0, T) times panels [0, P) (panel i at panels + i * stride) over all pairs, widening each
// pair as it goes: every accumulator adds its even column's product, then its odd column's. A
// panel's pair-vectors are loaded (and widened) again for the odd columns rather than kept (the
// second load hits L1), which leaves registers for 3 panels at decode.
template <int P, int T>
RADIX_AVX2 void Tile(const uint32_t* panels, int64_t stride, int64_t pairs, const float* x,
                     int64_t ldx, float* y, int64_t ldy, int64_t rows_left) {
  __m256 acc[P][2][T];
  for (int i = 0; i < P; ++i)
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < T; ++t) acc[i][h][t] = _mm256_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    const uint32_t* pair[P];
    for (int i = 0; i < P; ++i) {
      pair[i] = panels + i * stride + p * kRows;
      FetchL2(pair[i] + kFetchPairs * kRows);
    }
    // The even columns of every panel, then the odd ones; each panel's two weight vectors are
    // widened just before their multiply-adds, so the live registers are the accumulators, two
    // weight vectors and a broadcast (P x 2 x T + 3), and GCC keeps them all in registers.
#pragma GCC unroll 2
    for (int odd = 0; odd < 2; ++odd) {
#pragma GCC unroll 4
      for (int i = 0; i < P; ++i) {
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair[i]));
        const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair[i] + 8));
        const __m256 w0 = odd ? OddColumns(lo) : EvenColumns(lo);
        const __m256 w1 = odd ? OddColumns(hi) : EvenColumns(hi);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const __m256 xv = _mm256_broadcast_ss(x + t * ldx + 2 * p + odd);
          acc[i][0][t] = _mm256_fmadd_ps(w0, xv, acc[i][0][t]);
          acc[i][1][t] = _mm256_fmadd_ps(w1, xv, acc[i][1][t]);
        }
      }
    }
  }
  // Unrolled whole, so no accumulator is indexed at run time and none needs a stack slot (one
  // that GCC then kept up to date in the loop above).
#pragma GCC unroll 4
  for (int i = 0; i < P; ++i) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const int64_t live = rows_left - i * kRows - h * 8;  // StoreFirstLanes stores 8 at >= 8
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        StoreFirstLanes(y + t * ldy + i * kRows + h * 8, acc[i][h][t], live);
    }
  }
}

// Pairs [0, pairs) of one panel widened to f32 (float_matmul.h's F32 panel layout: the panel's 16
// rows per column), fetching the chunk widened next (`next`, next_pairs pairs) line for line: it
// is then in L2 when its turn comes, after this chunk's token tiles.
RADIX_AVX2 void Widen(const uint32_t* panel, int64_t pairs, float* wide, const uint32_t* next,
                      int64_t next_pairs) {
  for (int64_t p = 0; p < pairs; ++p) {
    if (p < next_pairs) FetchL2(next + p * kRows);
    for (int h = 0; h < 2; ++h) {
      const __m256i w =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + p * kRows + 8 * h));
      _mm256_store_ps(wide + 2 * p * kRows + 8 * h, EvenColumns(w));
      _mm256_store_ps(wide + (2 * p + 1) * kRows + 8 * h, OddColumns(w));
    }
  }
  for (int64_t p = pairs; p < next_pairs; ++p) FetchL2(next + p * kRows);
}

// Tokens [0, n) of panels [p0, p1) through widened chunks, the activations laid out token-major
// per tile (TokenMajorTiles: each thread copies the block it was given once, one copy per
// activation against ~w.rows / 2 multiply-adds): the tiles' broadcasts read one stream, not one
// per token row. Zen 3, against the rows as given: float_kernels_bench gemm-1b, 2 threads, three
// alternating runs, 512 tokens 142-152 -> 153-164 GFLOP/s and 32 tokens 99-128 -> 130-146; the 1B
// shape's BF16 prefill of 512 tokens 63-73 -> 64-76 tok/s (two alternating starts, four prefills
// each) and its 32-sequence decode step 576-583 -> 545-546 ms (bench/decode_step.py, 2 rounds).
// The running sums of a group between its chunks live in `sums` ([panel of the group][token][16
// rows], contiguous), not in y: y's rows lie w.rows floats apart, a power of two times 64 bytes
// for most models, so a panel's sums for all n tokens would map to one set of each cache and miss
// on every tile.
RADIX_AVX2 void WideRange(const uint32_t* panels, int64_t pairs, int64_t rows, const float* xr,
                          int64_t ldx, int64_t n, int64_t p0, int64_t p1, float* y) {
  const int64_t stride = pairs * kRows;
  alignas(64) float wide[2 * kWidePairs * kRows];
  thread_local std::vector<float> group_sums, token_major;
  group_sums.resize(static_cast<size_t>(kWideGroup * n * kRows));
  const int64_t cols = 2 * pairs;
  token_major.resize(static_cast<size_t>(n * cols));
  TokenMajorTiles(xr, ldx, n, cols, token_major.data());
  for (int64_t g = p0; g < p1; g += kWideGroup) {
    const int64_t g1 = std::min(p1, g + kWideGroup);
    for (int64_t k0 = 0; k0 < pairs; k0 += kWidePairs) {
      const int64_t kn = std::min(kWidePairs, pairs - k0);
      const bool last = k0 + kn == pairs;
      for (int64_t q = g; q < g1; ++q) {
        // The chunk after this one: the next panel's, else the group's next chunk, else the next
        // group's first.
        int64_t next_q = q + 1, next_k = k0;
        if (next_q == g1) {
          next_q = g;
          next_k = k0 + kWidePairs;
        }
        if (next_k >= pairs) {
          next_q = g1;
          next_k = 0;
        }
        const int64_t next_kn = next_q < p1 ? std::min(kWidePairs, pairs - next_k) : 0;
        Widen(panels + q * stride + k0 * kRows, kn, wide, panels + next_q * stride + next_k * kRows,
              next_kn);
        float* sums = group_sums.data() + (q - g) * n * kRows;
        PanelTokens<true>(token_major.data(), cols, 2 * k0, n, wide, 2 * kn, rows - q * kRows,
                          k0 == 0 ? nullptr : sums, kRows, last ? y + q * kRows : sums,
                          last ? rows : kRows);
      }
    }
  }
}

}  // namespace

void Avx2Bf16PanelRange(const uint32_t* panels, int64_t pairs, int64_t rows, const float* xr,
                        int64_t ldx, int64_t n, int64_t p0, int64_t p1, float* y) {
  if (n >= kWideFromTokens) return WideRange(panels, pairs, rows, xr, ldx, n, p0, p1, y);
  const int64_t stride = pairs * kRows;  // uint32 per panel
  int64_t p = p0;
  // Tokens [t, t + T) of panels [p, p + P).
  const auto run = [&]<int P, int T>(int64_t t) {
    Tile<P, T>(panels + p * stride, stride, pairs, xr + t * ldx, ldx, y + t * rows + p * kRows,
               rows, rows - p * kRows);
  };
  if (n <= 2) {
    for (; p + kDecodePanels <= p1; p += kDecodePanels) {
      if (n == 1) {
        run.template operator()<kDecodePanels, 1>(0);
      } else {
        run.template operator()<kDecodePanels, 2>(0);
      }
    }
  }
  // Tokens [t, t + tokens) of panel p, tokens 1 .. kAvx2PanelTokens as a compile-time size.
  const auto run_tile = [&]<int... T>(std::integer_sequence<int, T...>, int64_t tokens, int64_t t) {
    ((tokens == T + 1 ? run.template operator()<1, T + 1>(t) : void()), ...);
  };
  for (; p < p1; ++p) {
    for (int64_t t = 0; t < n;) {
      const int64_t tokens = PanelTileTokens(n, t);
      run_tile(std::make_integer_sequence<int, kAvx2PanelTokens>{}, tokens, t);
      t += tokens;
    }
  }
}

}  // namespace radixserve::kernels::x86

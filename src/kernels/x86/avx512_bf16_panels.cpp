// The BF16 panels (kernels/bf16_panels.h): packing, the AVX-512 products' tiles, and the pool
// and activation preparation that the AVX2 kernel (avx2_bf16_panels.h) shares.
//
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized on its own _mm512_undefined_* helpers
// when inlined into masked intrinsics; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "common/check.h"
#include "common/log.h"
#include "kernels/bf16_panels.h"
#include "kernels/float_matmul.h"
#include "kernels/half.h"
#include "kernels/x86/amx.h"
#include "kernels/x86/avx2_bf16_panels.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels {
namespace {

constexpr int64_t kRows = 16;  // rows per panel
// 3 x 8 accumulators: on Zen 5 the same speed as 2 x 10 for a 512-token chunk and 8-15 % faster
// for 32 rows (float_kernels_bench gemm-1b).
constexpr int kPanelsPerTile = 3;  // panels sharing each broadcast activation
constexpr int kTokensPerTile = 8;  // tokens sharing each panel load
// Tokens whose bf16-rounded activations are kept hot for one pass over a thread's panels.
constexpr int64_t kTokenBlock = 100;

// How far ahead (in column pairs, 64 bytes each) a panel stream is prefetched.
constexpr int64_t kPrefetchPairs = 32;
// MXCSR's denormals-are-zero (bit 6) and flush-to-zero (bit 15).
constexpr unsigned int kDazFtz = 0x8040;

int64_t Pairs(int64_t cols) { return (cols + 1) / 2; }

// acc[P][T] over all pairs: panel i at panels + i * panel_stride (uint32 units); token t's
// activations at x + t * ldx. Two products, the same numerics contract (bf16 products are exact
// in f32, sums in f32), different speeds by CPU (kernel_choice.h measures which is faster):
//   kWidenFma: x holds f32 values already rounded to bf16 (padded to 2 * pairs). Each pair-vector
//     is widened to two f32 vectors (the bf16 bits are the top half of an f32) and multiplied with
//     fused multiply-adds, even column first. On Sapphire Rapids vdpbf16ps issues at about a
//     third of the FMA rate, so this is faster there.
//   kDotBf16: x holds the rounded activations as bf16 pairs (one uint32 per pair, the even column
//     in the low half), and one vdpbf16ps per pair-vector and token adds both products; where it
//     runs at full rate (Zen 4/5) it does the work of two FMAs.
//   kAmxTile: AMX's TDPBF16PS arithmetic, for steps of fewer tokens than an AMX tile (their
//     results must be the tiles' bits): x as for kWidenFma; per instruction's 16 pairs the even
//     columns' products are summed in one f32 chain and the odd columns' in another (each a fused
//     multiply-add from zero, pairs in order), then acc += (even + odd). Measured on a Xeon with
//     AMX against the tiles' results, bit for bit (random bf16, also with cancellation); the
//     SDM's pseudo-code (one chain, even column first) is not what the hardware does. Denormals
//     are flushed as the tiles flush them (RunPanels sets MXCSR's DAZ and FTZ).
// Pair p of P panels (panel i at panels + i * panel_stride), each fetched ahead: one sequential
// stream per panel, and fetching ahead keeps DRAM busy at decode. Into L2 (FetchL2): 1B BF16
// decode 16.5-16.6 -> 16.8-17.1 tok/s on the Xeon with AMX.
template <int P>
[[gnu::always_inline]] RADIX_AVX512 inline void LoadPair(const uint32_t* panels,
                                                         int64_t panel_stride, int64_t p,
                                                         __m512i* w) {
#pragma GCC unroll 4
  for (int i = 0; i < P; ++i) {
    x86::FetchL2(panels + i * panel_stride + (p + kPrefetchPairs) * kRows);
    w[i] = _mm512_loadu_si512(panels + i * panel_stride + p * kRows);
  }
}

// Pair p's widened weights times the f32 activations of T tokens (row stride ldx): the even
// column's products into first, then the odd column's into second (the same accumulators for
// kWidenFma, two chains for kAmxTile).
template <int P, int T>
[[gnu::always_inline]] RADIX_AVX512 inline void AddWidenedPair(const __m512i* w, const float* x,
                                                               int64_t ldx, int64_t p,
                                                               __m512 (&first)[P][T],
                                                               __m512 (&second)[P][T]) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m512 even[P], odd[P];
#pragma GCC unroll 4
  for (int i = 0; i < P; ++i) {
    even[i] = _mm512_castsi512_ps(_mm512_slli_epi32(w[i], 16));
    odd[i] = _mm512_castsi512_ps(_mm512_and_si512(w[i], high));
  }
#pragma GCC unroll 10
  for (int t = 0; t < T; ++t) {
    const __m512 x0 = _mm512_set1_ps(x[t * ldx + 2 * p]);
    const __m512 x1 = _mm512_set1_ps(x[t * ldx + 2 * p + 1]);
#pragma GCC unroll 4
    for (int i = 0; i < P; ++i) {
      first[i][t] = _mm512_fmadd_ps(even[i], x0, first[i][t]);
      second[i][t] = _mm512_fmadd_ps(odd[i], x1, second[i][t]);
    }
  }
}

// The first rows_left rows of acc's panels (y row stride ldy).
template <int P, int T>
[[gnu::always_inline]] RADIX_AVX512 inline void StoreTile(const __m512 (&acc)[P][T], float* y,
                                                          int64_t ldy, int64_t rows_left) {
#pragma GCC unroll 4
  for (int i = 0; i < P; ++i) {
    const int64_t valid = std::min<int64_t>(kRows, rows_left - i * kRows);
    const auto mask = static_cast<__mmask16>((1u << valid) - 1u);
#pragma GCC unroll 10
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy + i * kRows, mask, acc[i][t]);
  }
}

// The kDotBf16 tile: its own function, the only one that needs AVX512-BF16 (the others run on
// AVX-512 CPUs without it, such as Ice Lake and Cascade Lake Xeons).
template <int P, int T>
RADIX_AVX512_BF16 void DotTile(const uint32_t* panels, int64_t panel_stride, int64_t pairs,
                               const uint32_t* xp, int64_t ldx, float* y, int64_t ldy,
                               int64_t rows_left) {
  __m512 acc[P][T];
#pragma GCC unroll 4
  for (int i = 0; i < P; ++i) {
#pragma GCC unroll 10
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < pairs; ++p) {
    __m512i w[P];
    LoadPair<P>(panels, panel_stride, p, w);
#pragma GCC unroll 10
    for (int t = 0; t < T; ++t) {
      const __m512bh xb =
          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(xp[t * ldx + p])));
#pragma GCC unroll 4
      for (int i = 0; i < P; ++i) {
        acc[i][t] = _mm512_dpbf16_ps(acc[i][t], reinterpret_cast<__m512bh>(w[i]), xb);
      }
    }
  }
  StoreTile<P, T>(acc, y, ldy, rows_left);
}

template <Bf16Product kProduct, int P, int T>
RADIX_AVX512 void Tile(const uint32_t* panels, int64_t panel_stride, int64_t pairs, const void* x,
                       int64_t ldx, float* y, int64_t ldy, int64_t rows_left) {
  static_assert(kProduct != Bf16Product::kDotBf16, "DotTile runs that product");
  __m512 acc[P][T];
#pragma GCC unroll 4
  for (int i = 0; i < P; ++i) {
#pragma GCC unroll 10
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  }
  const auto* xf = static_cast<const float*>(x);
  if constexpr (kProduct == Bf16Product::kAmxTile) {
    for (int64_t p0 = 0; p0 < pairs; p0 += x86::kAmxPairs) {
      __m512 even_sum[P][T], odd_sum[P][T];
#pragma GCC unroll 4
      for (int i = 0; i < P; ++i) {
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) even_sum[i][t] = odd_sum[i][t] = _mm512_setzero_ps();
      }
      for (int64_t p = p0; p < std::min(pairs, p0 + x86::kAmxPairs); ++p) {
        __m512i w[P];
        LoadPair<P>(panels, panel_stride, p, w);
        AddWidenedPair<P, T>(w, xf, ldx, p, even_sum, odd_sum);
      }
#pragma GCC unroll 4
      for (int i = 0; i < P; ++i) {
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          acc[i][t] = _mm512_add_ps(acc[i][t], _mm512_add_ps(even_sum[i][t], odd_sum[i][t]));
        }
      }
    }
  } else {
    for (int64_t p = 0; p < pairs; ++p) {
      __m512i w[P];
      LoadPair<P>(panels, panel_stride, p, w);
      AddWidenedPair<P, T>(w, xf, ldx, p, acc, acc);
    }
  }
  StoreTile<P, T>(acc, y, ldy, rows_left);
}

// A product's prepared activations: f32 values (kWidenFma, 2 * pairs per token row) or bf16
// pairs (kDotBf16, pairs per token row).
template <Bf16Product kProduct>
using Activation = std::conditional_t<kProduct == Bf16Product::kDotBf16, uint32_t, float>;

constexpr int64_t ActivationWidth(Bf16Product product, int64_t pairs) {
  return product == Bf16Product::kDotBf16 ? pairs : 2 * pairs;
}

template <Bf16Product kProduct, int P, int T>
RADIX_AVX512 void TileAt(const uint32_t* panels, int64_t panel_stride, int64_t pairs,
                         const Activation<kProduct>* x, int64_t ldx, int64_t t, float* y,
                         int64_t ldy, int64_t rows_left) {
  if constexpr (kProduct == Bf16Product::kDotBf16) {
    DotTile<P, T>(panels, panel_stride, pairs, x + t * ldx, ldx, y + t * ldy, ldy, rows_left);
  } else {
    Tile<kProduct, P, T>(panels, panel_stride, pairs, x + t * ldx, ldx, y + t * ldy, ldy,
                         rows_left);
  }
}

template <Bf16Product kProduct, int P>
RADIX_AVX512 void TokensTile(const uint32_t* panels, int64_t panel_stride, int64_t pairs,
                             const Activation<kProduct>* x, int64_t ldx, int64_t n, float* y,
                             int64_t ldy, int64_t rows_left) {
  int64_t t = 0;
  if constexpr (kProduct == Bf16Product::kAmxTile) {
    // Two accumulators per output: tiles of at most 2 tokens keep them in registers.
    for (; t + 2 <= n; t += 2) {
      TileAt<kProduct, P, 2>(panels, panel_stride, pairs, x, ldx, t, y, ldy, rows_left);
    }
    if (t < n) TileAt<kProduct, P, 1>(panels, panel_stride, pairs, x, ldx, t, y, ldy, rows_left);
    return;
  }
  for (; t + kTokensPerTile <= n; t += kTokensPerTile) {
    TileAt<kProduct, P, kTokensPerTile>(panels, panel_stride, pairs, x, ldx, t, y, ldy, rows_left);
  }
  const auto tail = [&]<int T>() {
    TileAt<kProduct, P, T>(panels, panel_stride, pairs, x, ldx, t, y, ldy, rows_left);
  };
  switch (n - t) {
    case 1:
      return tail.template operator()<1>();
    case 2:
      return tail.template operator()<2>();
    case 3:
      return tail.template operator()<3>();
    case 4:
      return tail.template operator()<4>();
    case 5:
      return tail.template operator()<5>();
    case 6:
      return tail.template operator()<6>();
    case 7:
      return tail.template operator()<7>();
    default:
      return;
  }
}

// Panels [p0, p1) for tokens [0, n) of the prepared activations xr (ActivationWidth per row).
template <Bf16Product kProduct>
RADIX_AVX512 void RunPanels(const WeightMatrix& w, const uint32_t* panels,
                            const Activation<kProduct>* xr, int64_t n, int64_t p0, int64_t p1,
                            float* y) {
  const int64_t pairs = Pairs(w.cols);
  const int64_t stride = pairs * kRows;  // uint32 per panel
  const int64_t ldx = ActivationWidth(kProduct, pairs);
  static_assert(kPanelsPerTile == 3 && kTokensPerTile == 8, "the tile dispatch assumes 3 x 8");
  // AMX's arithmetic treats denormal inputs as zero and flushes denormal results.
  const unsigned int mxcsr = _mm_getcsr();
  if constexpr (kProduct == Bf16Product::kAmxTile) _mm_setcsr(mxcsr | kDazFtz);
  for (int64_t p = p0; p < p1; p += kPanelsPerTile) {
    const uint32_t* panel = panels + p * stride;
    const int64_t rows_left = w.rows - p * kRows;
    float* yp = y + p * kRows;
    if (p + 2 < p1) {
      TokensTile<kProduct, 3>(panel, stride, pairs, xr, ldx, n, yp, w.rows, rows_left);
    } else if (p + 1 < p1) {
      TokensTile<kProduct, 2>(panel, stride, pairs, xr, ldx, n, yp, w.rows, rows_left);
    } else {
      TokensTile<kProduct, 1>(panel, stride, pairs, xr, ldx, n, yp, w.rows, rows_left);
    }
  }
  if constexpr (kProduct == Bf16Product::kAmxTile) _mm_setcsr(mxcsr);
}

// Token rows [t0, t1) of x rounded to bf16 (nearest even, by the float GEMM's rounding) in the
// product's form, `width` values per row: f32 values padded to an even width (out[t * width + c]),
// or bf16 pairs (out[t * width + p] holds columns 2p and 2p + 1 in its low and high half). Values
// past the columns up to `width` are zero.
template <Bf16Product kProduct>
void PrepareTokens(const FloatGemmKernels& kernels, const float* x, int64_t cols, int64_t width,
                   int64_t t0, int64_t t1, Activation<kProduct>* out) {
  const int64_t pairs = Pairs(cols);
  for (int64_t t = t0; t < t1; ++t) {
    Activation<kProduct>* row = out + t * width;
    if constexpr (kProduct == Bf16Product::kDotBf16) {
      // The rounded values' bf16 bits in column order are the pairs, little-endian: column 2p
      // in the low half of pair p, column 2p + 1 in the high half.
      auto* bits = reinterpret_cast<uint16_t*>(row);
      kernels.to_bf16(x + t * cols, bits, cols);
      if (2 * pairs > cols) {
        constexpr uint16_t kZero = 0;
        std::memcpy(bits + cols, &kZero, sizeof(kZero));
      }
      std::fill(row + pairs, row + width, 0u);
    } else {
      kernels.round_bf16(x + t * cols, row, cols);
      std::fill(row + cols, row + width, 0.0f);
    }
  }
}

// Token rows [0, n) of x prepared into `out` (`width` values per row), over the pool when
// `parallel` and there are enough of them: rounding costs about a pass over the activations, and
// below this size a hand-off costs more.
template <Bf16Product kProduct>
void PrepareAllTokens(const FloatGemmKernels& kernels, ThreadPool* pool, bool parallel,
                      const float* x, int64_t n, int64_t cols, int64_t width,
                      Activation<kProduct>* out) {
  constexpr int64_t kParallelRoundElements = 32 * 1024;
  if (parallel && n * cols >= kParallelRoundElements) {
    pool->RunOnAll([&](int index, int count) {
      PrepareTokens<kProduct>(kernels, x, cols, width, n * index / count, n * (index + 1) / count,
                              out);
    });
  } else {
    PrepareTokens<kProduct>(kernels, x, cols, width, 0, n, out);
  }
}

// The vector products over the pool: the activations prepared by `kernels` (rounded to bf16 in
// kProduct's form), then run_panels(xr, nt, p0, p1, y) for panels [p0, p1) and nt tokens of xr
// into y (row stride w.rows), blocks of at most token_block tokens at a time.
template <Bf16Product kProduct, typename RunPanelsFn>
void MatMulOver(const FloatGemmKernels& kernels, ThreadPool* pool, const float* x, int64_t n,
                const WeightMatrix& w, int64_t token_block, RunPanelsFn run_panels, float* y) {
  const int64_t pairs = Pairs(w.cols);
  const int64_t num_panels = (w.rows + kRows - 1) / kRows;
  // Named through a plain reference: inside the pool's lambdas a thread_local name would
  // resolve to the worker's own (empty) instance.
  thread_local std::vector<Activation<kProduct>> per_caller;
  std::vector<Activation<kProduct>>& xr = per_caller;
  const int64_t width = ActivationWidth(kProduct, pairs);
  xr.resize(static_cast<size_t>(n * width));
  // Each thread takes a contiguous range of whole tiles of panels and walks the tokens in blocks,
  // so its panels stay in cache while a block's activations stream through.
  const int64_t tiles = (num_panels + kPanelsPerTile - 1) / kPanelsPerTile;
  auto run = [&](int64_t begin, int64_t end) {
    const int64_t p0 = begin * kPanelsPerTile, p1 = std::min(num_panels, end * kPanelsPerTile);
    for (int64_t t0 = 0; t0 < n; t0 += token_block) {
      const int64_t nt = std::min(token_block, n - t0);
      run_panels(xr.data() + t0 * width, nt, p0, p1, y + t0 * w.rows);
    }
  };
  const bool parallel = pool != nullptr && pool->size() > 1 && tiles >= 2;
  PrepareAllTokens<kProduct>(kernels, pool, parallel, x, n, w.cols, width, xr.data());
  if (!parallel) {
    run(0, tiles);
    return;
  }
  pool->RunOnAll([&](int index, int count) {
    const int64_t parts = std::min<int64_t>(count, tiles);
    if (index < parts) run(tiles * index / parts, tiles * (index + 1) / parts);
  });
}

template <Bf16Product kProduct>
void MatMulWith(ThreadPool* pool, const float* x, int64_t n, const WeightMatrix& w,
                const uint8_t* panels, float* y) {
  const auto* packed = reinterpret_cast<const uint32_t*>(panels);
  MatMulOver<kProduct>(
      *Avx512FloatKernels(), pool, x, n, w, kTokenBlock,
      [&](const Activation<kProduct>* xr, int64_t nt, int64_t p0, int64_t p1, float* yb) {
        RunPanels<kProduct>(w, packed, xr, nt, p0, p1, yb);
      },
      y);
}

// The AMX product on the tiles: the activations as bf16 pairs in whole tiles (rows padded with
// zeros to x86::kAmxTokens, each row to x86::kAmxPairs pairs), and each thread a contiguous range
// of panels.
void MatMulAmxTiles(ThreadPool* pool, const float* x, int64_t n, const WeightMatrix& w,
                    const uint8_t* panels, float* y) {
  const int64_t pairs = Pairs(w.cols);
  const int64_t num_panels = (w.rows + kRows - 1) / kRows;
  const int64_t ldx = (pairs + x86::kAmxPairs - 1) / x86::kAmxPairs * x86::kAmxPairs;
  const int64_t padded_n = (n + x86::kAmxTokens - 1) / x86::kAmxTokens * x86::kAmxTokens;
  thread_local std::vector<uint32_t> per_caller;  // see MatMulWith
  std::vector<uint32_t>& xr = per_caller;
  xr.resize(static_cast<size_t>(padded_n * ldx));
  std::fill(xr.begin() + n * ldx, xr.end(), 0u);
  const bool parallel = pool != nullptr && pool->size() > 1 && num_panels >= 2;
  PrepareAllTokens<Bf16Product::kDotBf16>(*Avx512FloatKernels(), pool, parallel, x, n, w.cols, ldx,
                                          xr.data());
  const auto* packed = reinterpret_cast<const uint32_t*>(panels);
  if (!parallel) {
    x86::AmxBf16PanelRange(packed, pairs, w.rows, xr.data(), ldx, n, 0, num_panels, y);
    return;
  }
  pool->RunOnAll([&](int index, int count) {
    const int64_t parts = std::min<int64_t>(count, num_panels);
    if (index >= parts) return;
    x86::AmxBf16PanelRange(packed, pairs, w.rows, xr.data(), ldx, n, num_panels * index / parts,
                           num_panels * (index + 1) / parts, y);
  });
}

// The AMX product: steps of one or two tokens through its reproduction where it holds, the rest
// on the tiles (kBf16AmxReproducedTokens).
void MatMulAmx(ThreadPool* pool, const float* x, int64_t n, const WeightMatrix& w,
               const uint8_t* panels, float* y) {
  if (n <= kBf16AmxReproducedTokens && Bf16AmxSmallStepsReproduced()) {
    // A step of one or two tokens (decode) streams the weights faster through the VNNI-style
    // tiles, which reproduce the AMX tiles' bits (Tile's kAmxTile).
    return MatMulWith<Bf16Product::kAmxTile>(pool, x, n, w, panels, y);
  }
  MatMulAmxTiles(pool, x, n, w, panels, y);
}

}  // namespace

bool Bf16PanelsSupported() {
  static const bool ok = x86::CpuHasAvx512() && Avx512FloatKernels() != nullptr;
  return ok;
}

bool Bf16DotSupported() { return Bf16PanelsSupported() && x86::CpuHasAvx512Bf16(); }

bool Bf16AmxSupported() { return Bf16DotSupported() && x86::AmxBf16Usable(); }

// Whether Tile's kAmxTile gives this CPU's AMX tiles' bits, checked once on a small random
// product (a ragged last tile, cancellation, denormal inputs and results): the arithmetic was
// measured on one Xeon, and where another differs every step keeps to the tiles (results then still
// do not depend on the batch, and one-token steps read the weights more slowly).
bool Bf16AmxSmallStepsReproduced() {
  static const bool reproduced = [] {
    if (!Bf16AmxSupported()) return false;
    constexpr int64_t kCheckRows = 32, kCheckCols = 2 * 16 * 3 + 6;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    // Rows r % 2 == 0 scaled by 1e-9; token t % 3 == 0's activations bf16 denormals, t % 3 ==
    // 1's near 1e-30 (so some products and sums fall below the normal range).
    std::vector<uint16_t> weights(kCheckRows * kCheckCols);
    for (int64_t i = 0; i < kCheckRows * kCheckCols; ++i) {
      weights[i] = F32ToBf16(dist(rng) * ((i / kCheckCols) % 2 == 0 ? 1e-9f : 1.0f));
    }
    std::vector<float> x(x86::kAmxTokens * kCheckCols);
    for (int64_t i = 0; i < x86::kAmxTokens * kCheckCols; ++i) {
      const int64_t t = i / kCheckCols;
      x[i] = dist(rng) * (t % 3 == 0 ? 1e-39f : t % 3 == 1 ? 1e-30f : 1.0f);
    }
    const WeightMatrix w{WeightFormat::kBF16, kCheckRows, kCheckCols, weights.data()};
    std::vector<uint8_t> panels(static_cast<size_t>(Bf16PanelBytes(w)));
    PackBf16Panels(w, nullptr, panels.data());
    std::vector<float> tiles(static_cast<size_t>(x86::kAmxTokens * kCheckRows));
    std::vector<float> emulated(tiles.size());
    MatMulAmxTiles(nullptr, x.data(), x86::kAmxTokens, w, panels.data(), tiles.data());
    MatMulWith<Bf16Product::kAmxTile>(nullptr, x.data(), x86::kAmxTokens, w, panels.data(),
                                      emulated.data());
    if (std::memcmp(tiles.data(), emulated.data(), tiles.size() * sizeof(float)) == 0) return true;
    RADIX_LOG_WARN(
        "BF16: this CPU's AMX tiles add differently from the one-token kernel that reproduces "
        "them; every step stays on the tiles");
    return false;
  }();
  return reproduced;
}

int64_t Bf16PanelBytes(const WeightMatrix& w) {
  const int64_t panels = (w.rows + kRows - 1) / kRows;
  return panels * Pairs(w.cols) * kRows * 4;
}

void PackBf16Panels(const WeightMatrix& w, ThreadPool* pool, uint8_t* out) {
  RADIX_CHECK(w.format == WeightFormat::kBF16);
  const int64_t pairs = Pairs(w.cols);
  const int64_t panels = (w.rows + kRows - 1) / kRows;
  auto* dst = reinterpret_cast<uint16_t*>(out);
  auto pack = [&](int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q) {
      uint16_t* panel = dst + q * pairs * kRows * 2;
      std::memset(panel, 0, static_cast<size_t>(pairs * kRows * 4));
      for (int64_t r = 0; r < kRows && q * kRows + r < w.rows; ++r) {
        const auto* row = static_cast<const uint16_t*>(w.row(q * kRows + r));
        for (int64_t c = 0; c < w.cols; ++c) panel[(c / 2) * kRows * 2 + r * 2 + c % 2] = row[c];
      }
    }
  };
  if (pool == nullptr) {
    pack(0, panels);
  } else {
    pool->ParallelFor(panels, 16, pack);
  }
}

bool Bf16PanelsFor(std::string_view table) {
  if (table == "avx512") return Bf16PanelsSupported();
  return table == "avx2" && Avx2FloatKernels() != nullptr;
}

void Bf16PanelMatMulFor(std::string_view table, ThreadPool* pool, const float* x, int64_t n,
                        const WeightMatrix& w, const uint8_t* panels, float* y) {
  if (table == "avx2") return Bf16PanelMatMulAvx2(pool, x, n, w, panels, y);
  RADIX_CHECK_MSG(table == "avx512", "no BF16 panel kernel for this table");
  Bf16PanelMatMul(pool, x, n, w, panels, y);
}

void Bf16PanelMatMul(ThreadPool* pool, const float* x, int64_t n, const WeightMatrix& w,
                     const uint8_t* panels, float* y) {
  Bf16PanelMatMulWith(ActiveBf16Product(), pool, x, n, w, panels, y);
}

void Bf16PanelMatMulAvx2(ThreadPool* pool, const float* x, int64_t n, const WeightMatrix& w,
                         const uint8_t* panels, float* y) {
  RADIX_CHECK(Bf16PanelsFor("avx2") && w.format == WeightFormat::kBF16);
  if (n <= 0 || w.rows <= 0) return;
  // Blocks of whole 6-token tiles (x86/avx2_bf16_panels.cpp); 512 would keep neither a chunk's
  // activations nor the running sums in L2 (gemm-1b: 186-191 -> 136 GFLOP/s).
  constexpr int64_t kAvx2TokenBlock = 96;
  const int64_t pairs = Pairs(w.cols);
  const int64_t ldx = ActivationWidth(Bf16Product::kWidenFma, pairs);
  const auto* packed = reinterpret_cast<const uint32_t*>(panels);
  MatMulOver<Bf16Product::kWidenFma>(
      *Avx2FloatKernels(), pool, x, n, w, kAvx2TokenBlock,
      [&](const float* xr, int64_t nt, int64_t p0, int64_t p1, float* yb) {
        x86::Avx2Bf16PanelRange(packed, pairs, w.rows, xr, ldx, nt, p0, p1, yb);
      },
      y);
}

void Bf16PanelMatMulWith(Bf16Product product, ThreadPool* pool, const float* x, int64_t n,
                         const WeightMatrix& w, const uint8_t* panels, float* y) {
  RADIX_CHECK(Bf16PanelsSupported() && w.format == WeightFormat::kBF16);
  if (n <= 0 || w.rows <= 0) return;
  if (product == Bf16Product::kAmxTile) {
    RADIX_CHECK_MSG(x86::AmxBf16Usable(), "the amx_bf16 product needs AMX-BF16");
    MatMulAmx(pool, x, n, w, panels, y);
  } else if (product == Bf16Product::kDotBf16) {
    RADIX_CHECK_MSG(Bf16DotSupported(), "the dot_bf16 product needs AVX512-BF16");
    MatMulWith<Bf16Product::kDotBf16>(pool, x, n, w, panels, y);
  } else {
    MatMulWith<Bf16Product::kWidenFma>(pool, x, n, w, panels, y);
  }
}

}  // namespace radixserve::kernels

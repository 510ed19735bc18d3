// AVX2 primitives of the blocked paged attention (see kernels/attention.h). Head-dim tails are
// scalar; each output element still sums its terms in the same order.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/check.h"
#include "kernels/attention.h"
#include "kernels/fp8.h"
#include "kernels/half.h"
#include "kernels/x86/kv_rows.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels::x86 {
namespace {

// Eight fp8 codes widened to the half whose value is the code's (E5M2: the code is the top byte;
// E4M3: sign to bit 15, magnitude bits to bits 7..14, reading as 2^-8 times the value, see
// kernels/fp8.h).
RADIX_AVX2 inline __m128i Fp8ToHalf8(const void* base, KvType type, int64_t at) {
  const __m128i w = _mm_cvtepu8_epi16(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(base) + at)));
  if (type == KvType::kFp8E5M2) return _mm_slli_epi16(w, 8);
  return _mm_or_si128(_mm_slli_epi16(_mm_and_si128(w, _mm_set1_epi16(0x80)), 8),
                      _mm_slli_epi16(_mm_and_si128(w, _mm_set1_epi16(0x7F)), 7));
}

RADIX_AVX2 inline __m256 Load8(const void* base, KvType type, float scale, int64_t at) {
  switch (type) {
    case KvType::kF32:
      return _mm256_loadu_ps(static_cast<const float*>(base) + at);
    case KvType::kBF16: {
      const __m128i h = _mm_loadu_si128(
          reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + at));
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    case KvType::kF16:
      return _mm256_cvtph_ps(_mm_loadu_si128(
          reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + at)));
    case KvType::kFp8E4M3:
      return _mm256_mul_ps(_mm256_cvtph_ps(Fp8ToHalf8(base, type, at)),
                           _mm256_set1_ps(scale * 256.0f));
    case KvType::kFp8E5M2:
      return _mm256_mul_ps(_mm256_cvtph_ps(Fp8ToHalf8(base, type, at)), _mm256_set1_ps(scale));
    case KvType::kInt8:  // Gather passes the head's scale in `scale`
      return _mm256_mul_ps(
          _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
              reinterpret_cast<const __m128i*>(static_cast<const int8_t*>(base) + at)))),
          _mm256_set1_ps(scale));
  }
  return _mm256_setzero_ps();
}

float LoadOne(const void* base, KvType type, float scale, int64_t at) {
  switch (type) {
    case KvType::kF32:
      return static_cast<const float*>(base)[at];
    case KvType::kBF16:
      return Bf16ToF32(static_cast<const uint16_t*>(base)[at]);
    case KvType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(base)[at]);
    case KvType::kFp8E4M3:
      return Fp8E4M3ToF32(static_cast<const uint8_t*>(base)[at]) * scale;
    case KvType::kFp8E5M2:
      return Fp8E5M2ToF32(static_cast<const uint8_t*>(base)[at]) * scale;
    case KvType::kInt8:
      return static_cast<float>(static_cast<const int8_t*>(base)[at]) * scale;
  }
  return 0.0f;
}

// Random slots defeat the hardware prefetcher: ask for a row a few iterations ahead. Gathering
// head 0 fetches the whole slot (all KV heads), which the other heads' gathers then find in cache.
constexpr int64_t kPrefetchRows = 6;

[[gnu::always_inline]] inline void PrefetchRow(const void* base, KvType type, const int32_t* slots,
                                               int64_t i, int64_t count, int64_t slot_stride,
                                               int64_t offset, int64_t d) {
  if (i >= count) return;
  const auto size = static_cast<int64_t>(KvTypeSize(type));
  const int64_t bytes = (offset == 0 ? slot_stride : d) * size;
  const char* row = static_cast<const char*>(base) +
                    (static_cast<int64_t>(slots[i]) * slot_stride + offset) * size;
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b);
}

RADIX_AVX2 void Gather(const void* base, KvType type, float scale, const int32_t* slots,
                       int64_t count, int64_t slot_stride, int64_t offset, int64_t d, float* dst) {
  for (int64_t i = 0; i < kPrefetchRows; ++i)
    PrefetchRow(base, type, slots, i, count, slot_stride, offset, d);
  for (int64_t i = 0; i < count; ++i) {
    PrefetchRow(base, type, slots, i + kPrefetchRows, count, slot_stride, offset, d);
    const int64_t at = static_cast<int64_t>(slots[i]) * slot_stride + offset;
    const float s =
        type == KvType::kInt8 ? Int8HeadScale(static_cast<const int8_t*>(base) + at, d) : scale;
    int64_t c = 0;
    for (; c + 8 <= d; c += 8) _mm256_storeu_ps(dst + i * d + c, Load8(base, type, s, at + c));
    for (; c < d; ++c) dst[i * d + c] = LoadOne(base, type, s, at + c);
  }
}

RADIX_AVX2 float ExpTile(float* x, float max) {
  static_assert(kKeyTile % 8 == 0);
  const __m256 vmax = _mm256_set1_ps(max);
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < kKeyTile; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 live = _mm256_cmp_ps(v, neg_inf, _CMP_NEQ_OQ);
    const __m256 e = _mm256_and_ps(Exp(_mm256_sub_ps(v, vmax)), live);
    _mm256_storeu_ps(x + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

RADIX_AVX2 float ScaleMax(float* x, float scale) {
  static_assert(kKeyTile % 8 == 0);
  const __m256 vscale = _mm256_set1_ps(scale);
  __m256 max = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < kKeyTile; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vscale);
    _mm256_storeu_ps(x + i, v);
    max = _mm256_max_ps(v, max);  // a NaN score leaves the maximum as it was, as std::max does
  }
  return Max8(max);
}

// A query's sums as the value pass starts from them: acc times its factor, or zero without one.
RADIX_AVX2 inline __m256 LoadSums(const float* acc, const float* rescale, int64_t q) {
  return rescale != nullptr ? _mm256_mul_ps(_mm256_loadu_ps(acc), _mm256_set1_ps(rescale[q]))
                            : _mm256_setzero_ps();
}

// Value sums of Q queries over C vectors of 8 columns from c, keys [0, nk) of the f32 rows
// v + j * ldv: query q's weights at p + q * kKeyTile, its sums at acc + q * d. Every element sums
// its keys in ascending order. With Q = 4 and C = 3, 12 independent chains of multiply-adds hide
// the FMA latency that 8 left exposed.
template <int Q, int C>
RADIX_AVX2 void ValueSums(const float* p, const float* v, int64_t ldv, int64_t nk, int64_t d,
                          int64_t c, const float* rescale, float* acc) {
  __m256 a[Q][C];
  for (int q = 0; q < Q; ++q)
    for (int x = 0; x < C; ++x) a[q][x] = LoadSums(acc + q * d + c + 8 * x, rescale, q);
  for (int64_t j = 0; j < nk; ++j) {
    __m256 vv[C];
    for (int x = 0; x < C; ++x) vv[x] = _mm256_loadu_ps(v + j * ldv + c + 8 * x);
    for (int q = 0; q < Q; ++q) {
      const __m256 w = _mm256_set1_ps(p[q * kKeyTile + j]);
      for (int x = 0; x < C; ++x) a[q][x] = _mm256_fmadd_ps(w, vv[x], a[q][x]);
    }
  }
  for (int q = 0; q < Q; ++q)
    for (int x = 0; x < C; ++x) _mm256_storeu_ps(acc + q * d + c + 8 * x, a[q][x]);
}

using ValueSumsFn = void (*)(const float*, const float*, int64_t, int64_t, int64_t, int64_t,
                             const float*, float*);

// At most four queries share a block's value loads: 4 x 3 accumulators and 3 values.
inline constexpr int64_t kValueQueries = 4;
constexpr ValueSumsFn kValueSumsOf[kValueQueries][3] = {
    {ValueSums<1, 1>, ValueSums<1, 2>, ValueSums<1, 3>},
    {ValueSums<2, 1>, ValueSums<2, 2>, ValueSums<2, 3>},
    {ValueSums<3, 1>, ValueSums<3, 2>, ValueSums<3, 3>},
    {ValueSums<4, 1>, ValueSums<4, 2>, ValueSums<4, 3>}};

// Vectors of 8 columns in the next block of a row with `vectors` left: blocks of 3, the last of 2
// (or, from 4, two of 2).
constexpr int NextBlock(int64_t vectors) {
  return vectors == 4 || vectors == 2 ? 2 : vectors == 1 ? 1 : 3;
}

// accumulate (AttentionKernels) of nq queries over the d columns of the f32 rows v + j * ldv:
// blocks of columns as NextBlock makes them, the queries in groups of at most four of
// near-equal size, and the last d % 8 columns one at a time.
RADIX_AVX2 void Accumulate(const float* p, int64_t nq, const float* v, int64_t ldv, int64_t nk,
                           int64_t d, const float* rescale, float* acc) {
  const int64_t groups = (nq + kValueQueries - 1) / kValueQueries;
  const int64_t full = d & ~int64_t{7};
  for (int64_t c = 0; c < full;) {
    const int width = NextBlock((full - c) / 8);
    for (int64_t g = 0, i = 0; g < groups; ++g) {
      const int64_t n = nq / groups + (g < nq % groups ? 1 : 0);
      kValueSumsOf[n - 1][width - 1](p + i * kKeyTile, v, ldv, nk, d, c, RescaleFrom(rescale, i),
                                     acc + i * d);
      i += n;
    }
    c += 8 * width;
  }
  for (int64_t q = 0; q < nq; ++q) {
    for (int64_t c = full; c < d; ++c) {
      float a = rescale != nullptr ? acc[q * d + c] * rescale[q] : 0.0f;
      for (int64_t j = 0; j < nk; ++j) a = std::fma(p[q * kKeyTile + j], v[j * ldv + c], a);
      acc[q * d + c] = a;
    }
  }
}

// Direct reads (AttentionKernels::scores and accumulate_rows), the AVX2 form of the AVX-512
// kernels: a row's columns are widened 8 at a time as Load8 widens them, so the values are the
// gather's, and summed as the AVX2 float GEMM sums a gathered row against a token (one 8-lane
// accumulator from zero in column order, then Sum8's additions), so the bits are too.

// A tile's row pointers (rows[j] for its nk keys) and the next tile's (next[j], na of them, the
// rows fetched ahead), addressed as RowPointers addresses them.
template <KvType T>
struct TileRows {
  RADIX_AVX2 TileRows(const void* base, const int32_t* slots, int64_t nk, int64_t slot_stride,
                      int64_t offset, const int32_t* ahead, int64_t ahead_count)
      : na(std::min(ahead_count, kKeyTile)) {
    RowPointers<T>(base, slots, nk, slot_stride, offset, rows);
    RowPointers<T>(base, ahead, na, slot_stride, offset, next);
  }
  const char* rows[kKeyTile];
  const char* next[kKeyTile];
  int64_t na;
};

// Scores of keys j and j + 1 (row0, row1) against four queries (8 accumulators, 2 row vectors
// and the queries' vectors from memory), the eight lane sums at once through Sum8x8, stored at
// s[b * kKeyTile + r] for query b < nb and key r < nr. Query b is at q + b * D for a whole block
// (kWhole: one base register for all four, nb = 4 and nr = 2), else at qi[b]. The head size D is a
// constant, so the column loop unrolls whole.
template <KvType T, int D, bool kWhole>
RADIX_AVX2 inline void ScoresBlock(const float* q, const float* const* qi, const char* row0,
                                   const char* row1, float scale, int nb, int nr, float* s) {
  __m256 acc[8];  // acc[2 b + r]: query b, key r
  for (__m256& a : acc) a = _mm256_setzero_ps();
#pragma GCC unroll 32
  for (int64_t c = 0; c < D; c += 8) {
    const __m256 k0 = Load8(row0, T, scale, c), k1 = Load8(row1, T, scale, c);
    for (int b = 0; b < 4; ++b) {
      const __m256 x = _mm256_loadu_ps((kWhole ? q + b * D : qi[b]) + c);
      acc[2 * b] = _mm256_fmadd_ps(k0, x, acc[2 * b]);
      acc[2 * b + 1] = _mm256_fmadd_ps(k1, x, acc[2 * b + 1]);
    }
  }
  float sums[8];
  Sum8x8(acc, sums);
  for (int b = 0; b < nb; ++b) {
    for (int r = 0; r < nr; ++r) s[b * kKeyTile + r] = sums[2 * b + r];
  }
}

// ScoresBlock for the last queries of a head or the last key of a tile, out of line (inlined
// beside the whole blocks, it cost them registers).
template <KvType T, int D>
[[gnu::noinline]] RADIX_AVX2 void ScoresPart(const float* const* qi, const char* row0,
                                             const char* row1, float scale, int nb, int nr,
                                             float* s) {
  ScoresBlock<T, D, false>(nullptr, qi, row0, row1, scale, nb, nr, s);
}

// Scores of a tile: keys two at a time outermost (a lone last key is computed twice), then a
// row's heads in turn (so the rows are read in the order they lie: read head by head, a tile
// streamed from memory measured 1.3x slower), four queries at a time; each step fetches the
// same head of the next tile's same keys.
template <KvType T, int D>
RADIX_AVX2 void ScoresAs(const float* q, int heads, int64_t nq, const void* base, float scale,
                         const int32_t* slots, int64_t nk, int64_t slot_stride, int64_t offset,
                         const int32_t* ahead, int64_t ahead_count, float* s) {
  constexpr int64_t kHeadBytes = D * static_cast<int64_t>(KvTypeSize(T));
  const TileRows<T> tile(base, slots, nk, slot_stride, offset, ahead, ahead_count);
  const char* const* rows = tile.rows;
  const char* const* next = tile.next;
  const int64_t na = tile.na;
  for (int64_t j = 0; j < nk; j += 2) {
    const int nr = j + 1 < nk ? 2 : 1;
    for (int h = 0; h < heads; ++h) {
      const int64_t at = h * kHeadBytes;
      if (j < na) FetchBytes(next[j] + at, kHeadBytes);
      if (j + 1 < na) FetchBytes(next[j + 1] + at, kHeadBytes);
      const char* row0 = rows[j] + at;
      const char* row1 = rows[j + nr - 1] + at;
      for (int64_t i = 0; i < nq; i += 4) {
        const float* qh = q + (h * nq + i) * D;
        float* si = s + (h * nq + i) * kKeyTile + j;
        if (i + 4 <= nq && nr == 2) {
          ScoresBlock<T, D, true>(qh, nullptr, row0, row1, scale, 4, 2, si);
          continue;
        }
        const int nb = static_cast<int>(std::min<int64_t>(4, nq - i));
        const float* qi[4];
        for (int b = 0; b < 4; ++b) qi[b] = qh + std::min(b, nb - 1) * D;
        ScoresPart<T, D>(qi, row0, row1, scale, nb, nr, si);
      }
    }
  }
}

// Scores of many queries (a prefill block: its tokens times the query heads of a KV head), the
// bits of ScoresAs by another route. ScoresAs sums a query-key pair in eight lanes (lane l: columns
// l, l + 8, ... from zero) and then adds the lanes in Sum8's tree, and with many queries those
// horizontal sums per pair cost as much as the multiply-adds. Here each head's keys are first
// widened and transposed (keys along the lanes), so one vector carries lane l's chain for eight
// keys, and Sum8's tree, ((A0 + A4) + (A2 + A6)) + ((A1 + A5) + (A3 + A7)), is vertical additions.
// The transposition is paid once per head and tile and shared by every query.
// From 16 queries on (Zen 3, float_kernels_bench attention-tile, ns per key of the 1B shape's
// 8 heads; ScoresAs alternating with a first 4 x 3 form of these tiles: 8 queries about even,
// 16 queries 363-423 against 268-376, 64 queries 1433-1808 against 861-1163; the final 3 x 4
// tiles then 267-273 and 905-917, alternating with 4 x 3's 301-349 and 1066-1079).
inline constexpr int64_t kWideScoreQueries = 16;

// The 8 x 8 block v[row][lane] transposed in place: v[l] = lane l of the eight rows.
RADIX_AVX2 inline void Transpose8x8(__m256 (&v)[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int l = 0; l < 4; ++l) {
    v[l] = _mm256_permute2f128_ps(u[l], u[4 + l], 0x20);
    v[l + 4] = _mm256_permute2f128_ps(u[l], u[4 + l], 0x31);
  }
}

// Keys [0, nk) of one head (at byte `at` of rows[j]) widened as Load8 widens them into
// kt[c * kKeyTile + j], c < D, j below nk rounded up to 8 (the last key fills the rest); the
// same head of the next tile's keys (next, na of them) is fetched on the way.
template <KvType T, int D>
RADIX_AVX2 void TransposeKeys(const char* const* rows, int64_t at, int64_t nk,
                              const char* const* next, int64_t na, float scale, float* kt) {
  constexpr int64_t kHeadBytes = D * static_cast<int64_t>(KvTypeSize(T));
  for (int64_t j0 = 0; j0 < nk; j0 += 8) {
    for (int64_t j = j0; j < std::min(j0 + 8, na); ++j) FetchBytes(next[j] + at, kHeadBytes);
    const char* r[8];
    for (int i = 0; i < 8; ++i) r[i] = rows[std::min<int64_t>(j0 + i, nk - 1)] + at;
    for (int c = 0; c < D; c += 8) {
      __m256 v[8];
      for (int i = 0; i < 8; ++i) v[i] = Load8(r[i], T, scale, c);
      Transpose8x8(v);
      for (int l = 0; l < 8; ++l) _mm256_store_ps(kt + (c + l) * kKeyTile + j0, v[l]);
    }
  }
}

// Lane l's chains (columns l, l + 8, ... from zero) of Q queries (x, D floats apart) against G
// vectors of eight transposed keys from kt: a small GEMM per lane, 3 x 4 tiles of 12 independent
// chains fed by 3 broadcasts and 4 loads per step (at 64 queries 1.17x faster than 4 x 3 tiles,
// which were 1.2x faster than 6 x 2).
template <int D, int Q, int G>
[[gnu::always_inline]] RADIX_AVX2 inline void LaneChains(const float* x, const float* kt, int l,
                                                         __m256 (&a)[Q][G]) {
  for (auto& row : a)
    for (__m256& chain : row) chain = _mm256_setzero_ps();
#pragma GCC unroll 8
  for (int c0 = 0; c0 < D; c0 += 8) {
    __m256 k[G];
    for (int g = 0; g < G; ++g) k[g] = _mm256_load_ps(kt + (c0 + l) * kKeyTile + 8 * g);
    for (int i = 0; i < Q; ++i) {
      const __m256 xv = _mm256_broadcast_ss(x + i * D + c0 + l);
      for (int g = 0; g < G; ++g) a[i][g] = _mm256_fmadd_ps(k[g], xv, a[i][g]);
    }
  }
}

// a += part (each a lane sum's own operands: float addition commutes), and a into part.
template <int Q, int G>
[[gnu::always_inline]] RADIX_AVX2 inline void AddPart(__m256 (&a)[Q][G],
                                                      const float (&part)[Q][G][8]) {
  for (int i = 0; i < Q; ++i)
    for (int g = 0; g < G; ++g) a[i][g] = _mm256_add_ps(_mm256_load_ps(part[i][g]), a[i][g]);
}

template <int Q, int G>
[[gnu::always_inline]] RADIX_AVX2 inline void KeepPart(const __m256 (&a)[Q][G],
                                                       float (&part)[Q][G][8]) {
  for (int i = 0; i < Q; ++i)
    for (int g = 0; g < G; ++g) _mm256_store_ps(part[i][g], a[i][g]);
}

// Half of Sum8's tree into a: (A_l0 + A_l1) + (A_l2 + A_l3), A_l being lane l's chains, through
// two partial sums on the stack.
template <int D, int Q, int G>
[[gnu::always_inline]] RADIX_AVX2 inline void HalfTree(const float* x, const float* kt, int l0,
                                                       int l1, int l2, int l3, __m256 (&a)[Q][G],
                                                       float (&part)[2][Q][G][8]) {
  LaneChains<D, Q, G>(x, kt, l0, a);
  KeepPart<Q, G>(a, part[0]);
  LaneChains<D, Q, G>(x, kt, l1, a);
  AddPart<Q, G>(a, part[0]);
  KeepPart<Q, G>(a, part[0]);
  LaneChains<D, Q, G>(x, kt, l2, a);
  KeepPart<Q, G>(a, part[1]);
  LaneChains<D, Q, G>(x, kt, l3, a);
  AddPart<Q, G>(a, part[1]);
  AddPart<Q, G>(a, part[0]);
}

// Scores of Q queries against G vectors of eight transposed keys, into s (query i at
// s + i * kKeyTile): the eight lanes' chains one lane at a time, added in Sum8's tree.
template <int D, int Q, int G>
RADIX_AVX2 void WideTile(const float* x, const float* kt, float* s) {
  alignas(32) float part[2][Q][G][8];
  alignas(32) float first_half[Q][G][8];
  __m256 a[Q][G];
  HalfTree<D, Q, G>(x, kt, 0, 4, 2, 6, a, part);
  KeepPart<Q, G>(a, first_half);
  HalfTree<D, Q, G>(x, kt, 1, 5, 3, 7, a, part);
  AddPart<Q, G>(a, first_half);
  for (int i = 0; i < Q; ++i)
    for (int g = 0; g < G; ++g) _mm256_storeu_ps(s + i * kKeyTile + 8 * g, a[i][g]);
}

// WideTile over `vectors` key vectors, four at a time.
template <int D, int Q>
RADIX_AVX2 void WideRow(const float* x, const float* kt, int64_t vectors, float* s) {
  int64_t g = 0;
  for (; g + 4 <= vectors; g += 4) WideTile<D, Q, 4>(x, kt + 8 * g, s + 8 * g);
  switch (vectors - g) {
    case 3:
      return WideTile<D, Q, 3>(x, kt + 8 * g, s + 8 * g);
    case 2:
      return WideTile<D, Q, 2>(x, kt + 8 * g, s + 8 * g);
    case 1:
      return WideTile<D, Q, 1>(x, kt + 8 * g, s + 8 * g);
    default:
      return;
  }
}

// The scores of one head's nq queries (x) against its transposed keys, three queries at a time.
template <int D>
RADIX_AVX2 void WideQueries(const float* x, int64_t nq, const float* kt, int64_t vectors,
                            float* s) {
  int64_t i = 0;
  for (; i + 3 <= nq; i += 3) WideRow<D, 3>(x + i * D, kt, vectors, s + i * kKeyTile);
  if (nq - i == 2) WideRow<D, 2>(x + i * D, kt, vectors, s + i * kKeyTile);
  if (nq - i == 1) WideRow<D, 1>(x + i * D, kt, vectors, s + i * kKeyTile);
}

// ScoresAs for nq >= kWideScoreQueries (see above). Writes s up to nk rounded up to 8 keys.
template <KvType T, int D>
RADIX_AVX2 void ScoresWideAs(const float* q, int heads, int64_t nq, const void* base, float scale,
                             const int32_t* slots, int64_t nk, int64_t slot_stride, int64_t offset,
                             const int32_t* ahead, int64_t ahead_count, float* s) {
  static_assert(kKeyTile % 8 == 0);
  constexpr int64_t kHeadBytes = D * static_cast<int64_t>(KvTypeSize(T));
  alignas(32) static thread_local float kt[D * kKeyTile];
  const TileRows<T> tile(base, slots, nk, slot_stride, offset, ahead, ahead_count);
  const char* const* rows = tile.rows;
  const char* const* next = tile.next;
  const int64_t na = tile.na;
  for (int h = 0; h < heads; ++h) {
    TransposeKeys<T, D>(rows, h * kHeadBytes, nk, next, na, scale, kt);
    WideQueries<D>(q + h * nq * D, nq, kt, (nk + 7) / 8, s + h * nq * kKeyTile);
  }
}

// Value sums of Q queries over C vectors of 8 columns from c (Q * C accumulators), keys
// [0, nk) of the head at byte `at` of rows[j]; key j also fetches lines [l0, l1) of the head in
// next[j] (j < na). With Q = 4 and C = 3, 12 independent chains of multiply-adds hide the FMA
// latency that 8 left exposed.
template <KvType T, int Q, int C>
RADIX_AVX2 void AccumulateBlock(const float* p, const char* const* rows, int64_t at, int64_t nk,
                                const char* const* next, int64_t na, int l0, int l1, float scale,
                                int64_t d, int64_t c, const float* rescale, float* acc) {
  __m256 a[Q][C];
  for (int q = 0; q < Q; ++q)
    for (int x = 0; x < C; ++x) a[q][x] = LoadSums(acc + q * d + c + 8 * x, rescale, q);
  for (int64_t j = 0; j < nk; ++j) {
    if (j < na) {
      for (int l = l0; l < l1; ++l) FetchL2(next[j] + at + 64 * l);
    }
    const char* row = rows[j] + at;
    __m256 v[C];
    for (int x = 0; x < C; ++x) v[x] = Load8(row, T, scale, c + 8 * x);
    for (int q = 0; q < Q; ++q) {
      const __m256 w = _mm256_set1_ps(p[q * kKeyTile + j]);
      for (int x = 0; x < C; ++x) a[q][x] = _mm256_fmadd_ps(w, v[x], a[q][x]);
    }
  }
  for (int q = 0; q < Q; ++q)
    for (int x = 0; x < C; ++x) _mm256_storeu_ps(acc + q * d + c + 8 * x, a[q][x]);
}

// Blocks of AccumulateBlock over the V vectors of columns from c: of 3, the last of 2 (or, from
// 4, two of 2). The head's lines of the next rows are shared out evenly among the blocks, so the
// fetches spread over the whole pass (a burst of them stalls the core on its miss buffers).
constexpr int ColumnBlocks(int v) { return v == 0 ? 0 : 1 + ColumnBlocks(v - NextBlock(v)); }

template <KvType T, int Q, int V>
struct AccumulateColumns {
  static constexpr int kBlocks = ColumnBlocks(V);

  template <int kLines, int kIndex = 0, int kAllBlocks = kBlocks>
  RADIX_AVX2 static void Run(const float* p, const char* const* rows, int64_t at, int64_t nk,
                             const char* const* next, int64_t na, float scale, int64_t d, int64_t c,
                             const float* rescale, float* acc) {
    if constexpr (V > 0) {
      constexpr int kWidth = NextBlock(V);
      constexpr int l0 = (kIndex * kLines + kAllBlocks - 1) / kAllBlocks;
      constexpr int l1 = ((kIndex + 1) * kLines + kAllBlocks - 1) / kAllBlocks;
      AccumulateBlock<T, Q, kWidth>(p, rows, at, nk, next, na, l0, l1, scale, d, c, rescale, acc);
      AccumulateColumns<T, Q, V - kWidth>::template Run<kLines, kIndex + 1, kAllBlocks>(
          p, rows, at, nk, next, na, scale, d, c + 8 * kWidth, rescale, acc);
    }
  }
};

// Value sums of `heads` heads, one head at a time over the tile's keys, four queries at a time;
// the first queries' pass fetches the head's rows of the next tile.
template <KvType T, int D>
RADIX_AVX2 void AccumulateAs(const float* p, int heads, int64_t nq, const void* base, float scale,
                             const int32_t* slots, int64_t nk, int64_t slot_stride, int64_t offset,
                             const int32_t* ahead, int64_t ahead_count, const float* rescale,
                             float* const* acc) {
  constexpr int64_t kHeadBytes = D * static_cast<int64_t>(KvTypeSize(T));
  constexpr int kLines = static_cast<int>((kHeadBytes + 63) / 64);
  const TileRows<T> tile(base, slots, nk, slot_stride, offset, ahead, ahead_count);
  const char* const* rows = tile.rows;
  const char* const* next = tile.next;
  const int64_t na = tile.na;
  for (int h = 0; h < heads; ++h) {
    const int64_t at = h * kHeadBytes;
    for (int64_t i = 0; i < nq; i += 4) {
      const float* pi = p + (h * nq + i) * kKeyTile;
      float* ai = acc[h] + i * D;
      const float* ri = RescaleFrom(rescale, h * nq + i);
      const int64_t fetch = i == 0 ? na : 0;
      switch (std::min<int64_t>(4, nq - i)) {
        case 4:
          AccumulateColumns<T, 4, D / 8>::template Run<kLines>(pi, rows, at, nk, next, fetch, scale,
                                                               D, 0, ri, ai);
          break;
        case 3:
          AccumulateColumns<T, 3, D / 8>::template Run<kLines>(pi, rows, at, nk, next, fetch, scale,
                                                               D, 0, ri, ai);
          break;
        case 2:
          AccumulateColumns<T, 2, D / 8>::template Run<kLines>(pi, rows, at, nk, next, fetch, scale,
                                                               D, 0, ri, ai);
          break;
        default:
          AccumulateColumns<T, 1, D / 8>::template Run<kLines>(pi, rows, at, nk, next, fetch, scale,
                                                               D, 0, ri, ai);
          break;
      }
    }
  }
}

// Value sums of many queries, the bits of AccumulateAs by another route: AccumulateAs widens a
// row's columns for every group of four queries, and the widening (bf16: a shift; f16: two
// micro-operations on Intel's multiply-add ports) costs a share of the multiply-adds. Here each
// head's rows are widened once per tile into vt (row j at vt + j * D) and the gathered rows' value
// sums run over them; every element still sums its keys in ascending order.
inline constexpr int64_t kWideValueQueries = 16;

template <KvType T, int D>
RADIX_AVX2 void AccumulateWideAs(const float* p, int heads, int64_t nq, const void* base,
                                 float scale, const int32_t* slots, int64_t nk, int64_t slot_stride,
                                 int64_t offset, const int32_t* ahead, int64_t ahead_count,
                                 const float* rescale, float* const* acc) {
  constexpr int64_t kHeadBytes = D * static_cast<int64_t>(KvTypeSize(T));
  alignas(32) static thread_local float vt[kKeyTile * D];
  const TileRows<T> tile(base, slots, nk, slot_stride, offset, ahead, ahead_count);
  for (int h = 0; h < heads; ++h) {
    const int64_t at = h * kHeadBytes;
    for (int64_t j = 0; j < nk; ++j) {
      if (j < tile.na) FetchBytes(tile.next[j] + at, kHeadBytes);
      const char* row = tile.rows[j] + at;
      for (int64_t c = 0; c < D; c += 8) _mm256_store_ps(vt + j * D + c, Load8(row, T, scale, c));
    }
    Accumulate(p + h * nq * kKeyTile, nq, vt, D, nk, D, RescaleFrom(rescale, h * nq), acc[h]);
  }
}

// Calls K<T, D>::Run(args...) for the cache's element type (one of ReadsDirect's) and head size.
template <template <KvType, int> class K, KvType T, typename... Args>
RADIX_AVX2 void ForSize(int64_t d, Args... args) {
  switch (d) {
    case 32:
      return K<T, 32>::Run(args...);
    case 64:
      return K<T, 64>::Run(args...);
    case 128:
      return K<T, 128>::Run(args...);
    default:
      return K<T, 256>::Run(args...);
  }
}

template <template <KvType, int> class K, typename... Args>
RADIX_AVX2 void ForType(KvType type, int64_t d, Args... args) {
  switch (type) {
    case KvType::kF32:
      return ForSize<K, KvType::kF32>(d, args...);
    case KvType::kF16:
      return ForSize<K, KvType::kF16>(d, args...);
    case KvType::kFp8E4M3:
      return ForSize<K, KvType::kFp8E4M3>(d, args...);
    case KvType::kFp8E5M2:
      return ForSize<K, KvType::kFp8E5M2>(d, args...);
    default:
      return ForSize<K, KvType::kBF16>(d, args...);
  }
}

template <KvType T, int D>
struct ScoresKernel {
  template <typename... Args>
  RADIX_AVX2 static void Run(const float* q, int heads, int64_t nq, Args... args) {
    if (nq >= kWideScoreQueries) {
      ScoresWideAs<T, D>(q, heads, nq, args...);
    } else {
      ScoresAs<T, D>(q, heads, nq, args...);
    }
  }
};

template <KvType T, int D>
struct AccumulateKernel {
  template <typename... Args>
  RADIX_AVX2 static void Run(const float* p, int heads, int64_t nq, Args... args) {
    if (nq >= kWideValueQueries) {
      AccumulateWideAs<T, D>(p, heads, nq, args...);
    } else {
      AccumulateAs<T, D>(p, heads, nq, args...);
    }
  }
};

RADIX_AVX2 void Scores(const float* q, int heads, int64_t nq, const void* base, KvType type,
                       float scale, const int32_t* slots, int64_t nk, int64_t slot_stride,
                       int64_t offset, int64_t d, const int32_t* ahead, int64_t ahead_count,
                       float* s) {
  RADIX_CHECK(ReadsDirect(type, d));
  ForType<ScoresKernel>(type, d, q, heads, nq, base, scale, slots, nk, slot_stride, offset, ahead,
                        ahead_count, s);
}

RADIX_AVX2 void AccumulateRowsDirect(const float* p, int heads, int64_t nq, const void* base,
                                     KvType type, float scale, const int32_t* slots, int64_t nk,
                                     int64_t slot_stride, int64_t offset, int64_t d,
                                     const int32_t* ahead, int64_t ahead_count,
                                     const float* rescale, float* const* acc) {
  RADIX_CHECK(ReadsDirect(type, d));
  ForType<AccumulateKernel>(type, d, p, heads, nq, base, scale, slots, nk, slot_stride, offset,
                            ahead, ahead_count, rescale, acc);
}

// Eight floats to fp8 codes, the vector form of kernels/fp8.h's encoder: saturate, then round the
// subnormal range as integers (cvtps rounds to nearest even) and the normal range on the bits;
// the largest finite magnitude `max` encodes to the largest finite code.
template <int kExp, int kMan>
RADIX_AVX2 inline void F32ToFp8x8(__m256 x, float max, uint8_t* dst) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr int kDrop = 23 - kMan;
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 24), _mm256_set1_epi32(0x80));
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 a = _mm256_min_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(max));
  const __m256i sub =
      _mm256_cvtps_epi32(_mm256_mul_ps(a, _mm256_set1_ps(std::ldexp(1.0f, kBias - 1 + kMan))));
  __m256i u = _mm256_castps_si256(a);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, kDrop), _mm256_set1_epi32(1));
  u = _mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32((1 << (kDrop - 1)) - 1)));
  const __m256i normal =
      _mm256_sub_epi32(_mm256_srli_epi32(u, kDrop), _mm256_set1_epi32((127 - kBias) << kMan));
  const __m256 is_sub = _mm256_cmp_ps(a, _mm256_set1_ps(std::ldexp(1.0f, 1 - kBias)), _CMP_LT_OQ);
  __m256i code = _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(normal), _mm256_castsi256_ps(sub), is_sub));
  code = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(code),
                                              _mm256_castsi256_ps(_mm256_set1_epi32(0x7F)), nan));
  code = _mm256_or_si256(code, sign);
  const __m128i words =
      _mm_packus_epi32(_mm256_castsi256_si128(code), _mm256_extracti128_si256(code, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm_packus_epi16(words, words));
}

RADIX_AVX2 void Store(const float* src, int64_t count, KvType type, float scale, void* dst) {
  if (type == KvType::kInt8) return StoreInt8Head(src, count, dst);
  int64_t i = 0;
  const float inv = 1.0f / scale;
  if (type == KvType::kFp8E4M3 || type == KvType::kFp8E5M2) {
    auto* out = static_cast<uint8_t*>(dst);
    const __m256 vinv = _mm256_set1_ps(inv);
    for (; i + 8 <= count; i += 8) {
      const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(src + i), vinv);
      if (type == KvType::kFp8E4M3) {
        F32ToFp8x8<4, 3>(x, kFp8E4M3Max, out + i);
      } else {
        F32ToFp8x8<5, 2>(x, kFp8E5M2Max, out + i);
      }
    }
  }
  if (type == KvType::kF16) {
    for (; i + 8 <= count; i += 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(dst) + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    }
  }
  for (; i < count; ++i) {
    switch (type) {
      case KvType::kF32:
        static_cast<float*>(dst)[i] = src[i];
        break;
      case KvType::kBF16:
        static_cast<uint16_t*>(dst)[i] = F32ToBf16(src[i]);
        break;
      case KvType::kF16:
        static_cast<uint16_t*>(dst)[i] = F32ToF16(src[i]);
        break;
      case KvType::kFp8E4M3:
        static_cast<uint8_t*>(dst)[i] = F32ToFp8E4M3(src[i] * inv);
        break;
      case KvType::kFp8E5M2:
        static_cast<uint8_t*>(dst)[i] = F32ToFp8E5M2(src[i] * inv);
        break;
      case KvType::kInt8:
        break;  // handled above
    }
  }
}

}  // namespace

const AttentionKernels& Avx2AttentionTable() {
  static const AttentionKernels table{"avx2",  Gather,      ExpTile, Accumulate,
                                      Store,   ReadsDirect, Scores,  AccumulateRowsDirect,
                                      ScaleMax};
  return table;
}

}  // namespace radixserve::kernels::x86

// AVX-512 primitives of the blocked paged attention (see kernels/attention.h): KV row gathers with
// bf16/f16 widening, the exp of a score tile, and the probability-weighted V accumulation.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/check.h"
#include "kernels/attention.h"
#include "kernels/x86/kv_rows.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels::x86 {

const AttentionKernels& Avx2AttentionTable();

namespace {

RADIX_AVX512 inline __mmask16 Mask16(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xFFFF)
                         : static_cast<__mmask16>((1u << remaining) - 1u);
}

RADIX_AVX512 inline __m512 LoadAs(const void* base, KvType type, int64_t at, __mmask16 m) {
  switch (type) {
    case KvType::kF32:
      return _mm512_maskz_loadu_ps(m, static_cast<const float*>(base) + at);
    case KvType::kBF16: {
      const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(base) + at);
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    case KvType::kF16:
      return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(base) + at));
    case KvType::kFp8E4M3:
    case KvType::kFp8E5M2:
    case KvType::kInt8:
      break;  // Gather hands fp8 and int8 rows to the AVX2 variant
  }
  return _mm512_setzero_ps();
}

// Random slots defeat the hardware prefetcher: ask for a row a few iterations ahead. Gathering
// head 0 fetches the whole slot (all KV heads), which the other heads' gathers then find in cache.
constexpr int64_t kPrefetchRows = 6;

[[gnu::always_inline]] RADIX_AVX512 inline void PrefetchRow(const void* base, KvType type,
                                                            const int32_t* slots, int64_t i,
                                                            int64_t count, int64_t slot_stride,
                                                            int64_t offset, int64_t d) {
  if (i >= count) return;
  const auto size = static_cast<int64_t>(KvTypeSize(type));
  const int64_t bytes = (offset == 0 ? slot_stride : d) * size;
  const char* row = static_cast<const char*>(base) +
                    (static_cast<int64_t>(slots[i]) * slot_stride + offset) * size;
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b);
}

template <KvType T>
RADIX_AVX512 void GatherAs(const void* base, const int32_t* slots, int64_t count,
                           int64_t slot_stride, int64_t offset, int64_t d, float* dst) {
  for (int64_t i = 0; i < kPrefetchRows; ++i)
    PrefetchRow(base, T, slots, i, count, slot_stride, offset, d);
  const int64_t full = d & ~int64_t{15};
  for (int64_t i = 0; i < count; ++i) {
    PrefetchRow(base, T, slots, i + kPrefetchRows, count, slot_stride, offset, d);
    const int64_t at = static_cast<int64_t>(slots[i]) * slot_stride + offset;
    float* out = dst + i * d;
    int64_t c = 0;
    for (; c < full; c += 16) _mm512_storeu_ps(out + c, LoadAs(base, T, at + c, 0xFFFF));
    if (c < d) {
      const __mmask16 m = Mask16(d - c);
      _mm512_mask_storeu_ps(out + c, m, LoadAs(base, T, at + c, m));
    }
  }
}

// FP8 and int8 rows are widened by the AVX2 variant (every AVX-512 CPU has AVX2, FMA and F16C).
RADIX_AVX512 void Gather(const void* base, KvType type, float scale, const int32_t* slots,
                         int64_t count, int64_t slot_stride, int64_t offset, int64_t d,
                         float* dst) {
  switch (type) {
    case KvType::kF32:
      return GatherAs<KvType::kF32>(base, slots, count, slot_stride, offset, d, dst);
    case KvType::kBF16:
      return GatherAs<KvType::kBF16>(base, slots, count, slot_stride, offset, d, dst);
    case KvType::kF16:
      return GatherAs<KvType::kF16>(base, slots, count, slot_stride, offset, d, dst);
    case KvType::kFp8E4M3:
    case KvType::kFp8E5M2:
    case KvType::kInt8:
      return Avx2AttentionTable().gather(base, type, scale, slots, count, slot_stride, offset, d,
                                         dst);
  }
}

RADIX_AVX512 float ExpTile(float* x, float max) {
  static_assert(kKeyTile % 16 == 0);
  const __m512 vmax = _mm512_set1_ps(max);
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < kKeyTile; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __mmask16 live = _mm512_cmp_ps_mask(v, neg_inf, _CMP_NEQ_OQ);
    const __m512 e = _mm512_maskz_mov_ps(live, Exp(_mm512_sub_ps(v, vmax)));
    _mm512_storeu_ps(x + i, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

// A query's sums as a value pass starts from them: acc times its factor (rounded on its own, as
// the separate rescale it replaces was), or zero without one.
RADIX_AVX512 inline __m512 LoadSums(__mmask16 m, const float* acc, const float* rescale, int q) {
  return rescale != nullptr
             ? _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc), _mm512_set1_ps(rescale[q]))
             : _mm512_setzero_ps();
}

// Value sums of Q queries over V vectors of columns from c0 (the last one's lanes masked by
// `tail`), keys [0, nk) of the f32 rows v + j * ldv: query q's weights at p + q * kKeyTile, its
// sums at acc + q * d. Every element sums its keys in ascending order.
template <int Q, int V>
RADIX_AVX512 void ValueSums(const float* p, const float* v, int64_t ldv, int64_t nk, int64_t d,
                            int64_t c0, __mmask16 tail, const float* rescale, float* acc) {
  __mmask16 m[V];
  __m512 a[Q][V];
  // Every loop over queries and vectors unrolled whole: with one left rolled GCC kept the
  // accumulators in stack slots and stored them after every key's multiply-adds.
#pragma GCC unroll 4
  for (int x = 0; x < V; ++x) {
    m[x] = x + 1 < V ? static_cast<__mmask16>(0xFFFF) : tail;
#pragma GCC unroll 6
    for (int q = 0; q < Q; ++q) a[q][x] = LoadSums(m[x], acc + q * d + c0 + 16 * x, rescale, q);
  }
  for (int64_t j = 0; j < nk; ++j) {
    __m512 vv[V];
#pragma GCC unroll 4
    for (int x = 0; x < V; ++x) {
      const float* at = v + j * ldv + c0 + 16 * x;
      vv[x] = x + 1 < V ? _mm512_loadu_ps(at) : _mm512_maskz_loadu_ps(m[x], at);
    }
#pragma GCC unroll 6
    for (int q = 0; q < Q; ++q) {
      const __m512 w = _mm512_set1_ps(p[q * kKeyTile + j]);
#pragma GCC unroll 4
      for (int x = 0; x < V; ++x) a[q][x] = _mm512_fmadd_ps(w, vv[x], a[q][x]);
    }
  }
#pragma GCC unroll 4
  for (int x = 0; x < V; ++x)
#pragma GCC unroll 6
    for (int q = 0; q < Q; ++q) _mm512_mask_storeu_ps(acc + q * d + c0 + 16 * x, m[x], a[q][x]);
}

using ValueSumsFn = void (*)(const float*, const float*, int64_t, int64_t, int64_t, int64_t,
                             __mmask16, const float*, float*);

// At most six queries share a block's value loads: 6 x 4 accumulators and 4 values.
inline constexpr int64_t kValueQueries = 6;
constexpr ValueSumsFn kValueSumsOf[kValueQueries][4] = {
    {ValueSums<1, 1>, ValueSums<1, 2>, ValueSums<1, 3>, ValueSums<1, 4>},
    {ValueSums<2, 1>, ValueSums<2, 2>, ValueSums<2, 3>, ValueSums<2, 4>},
    {ValueSums<3, 1>, ValueSums<3, 2>, ValueSums<3, 3>, ValueSums<3, 4>},
    {ValueSums<4, 1>, ValueSums<4, 2>, ValueSums<4, 3>, ValueSums<4, 4>},
    {ValueSums<5, 1>, ValueSums<5, 2>, ValueSums<5, 3>, ValueSums<5, 4>},
    {ValueSums<6, 1>, ValueSums<6, 2>, ValueSums<6, 3>, ValueSums<6, 4>}};

// accumulate (AttentionKernels) of nq queries over all d columns of the f32 rows v + j * ldv:
// blocks of 64 columns (the last one narrower when d is not a multiple of 64, with no work for the
// columns past d), the queries in groups of at most six of near-equal size.
RADIX_AVX512 void Accumulate(const float* p, int64_t nq, const float* v, int64_t ldv, int64_t nk,
                             int64_t d, const float* rescale, float* acc) {
  const int64_t groups = (nq + kValueQueries - 1) / kValueQueries;
  for (int64_t c0 = 0; c0 < d; c0 += 64) {
    const int64_t cols = std::min<int64_t>(64, d - c0);
    const auto vectors = static_cast<int>((cols + 15) / 16);
    const __mmask16 tail = Mask16(cols - 16 * (vectors - 1));
    for (int64_t g = 0, i = 0; g < groups; ++g) {
      const int64_t n = nq / groups + (g < nq % groups ? 1 : 0);
      const float* pi = p + i * kKeyTile;
      const float* ri = RescaleFrom(rescale, i);
      float* ai = acc + i * d;
      kValueSumsOf[n - 1][vectors - 1](pi, v, ldv, nk, d, c0, tail, ri, ai);
      i += n;
    }
  }
}

// Direct reads (AttentionKernels::scores and accumulate_rows). A row's d columns are read 32 at a
// time, as two vectors in column order whatever the type (bf16 halves are moved into the high
// half of each lane by one word permute per 16 columns; fp8 codes become halves as the AVX2
// gather makes them, then are multiplied by its factor), so the same values give the same bits
// from an f32, a bf16, an f16 or an fp8 cache, and fp8 rows the gather's bits.

// The factor fp8 halves are multiplied by (the AVX2 gather's: E4M3 halves read as 2^-8 times the
// code's value, kernels/fp8.h); unused for the other types.
template <KvType T>
RADIX_AVX512 inline __m512 Fp8Factor(float scale) {
  return _mm512_set1_ps(T == KvType::kFp8E4M3 ? scale * 256.0f : scale);
}

template <KvType T>
RADIX_AVX512 inline void LoadPair(const void* row, int64_t c, __m512 factor, __m512& lo,
                                  __m512& hi) {
  if constexpr (T == KvType::kFp8E4M3 || T == KvType::kFp8E5M2) {
    const __m512i b = _mm512_cvtepu8_epi16(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint8_t*>(row) + c)));
    __m512i h;
    if constexpr (T == KvType::kFp8E5M2) {
      h = _mm512_slli_epi16(b, 8);  // the code is a half's top byte
    } else {
      h = _mm512_or_si512(_mm512_slli_epi16(_mm512_and_si512(b, _mm512_set1_epi16(0x80)), 8),
                          _mm512_slli_epi16(_mm512_and_si512(b, _mm512_set1_epi16(0x7F)), 7));
    }
    lo = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), factor);
    hi = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), factor);
  } else if constexpr (T == KvType::kF32) {
    const float* p = static_cast<const float*>(row) + c;
    lo = _mm512_loadu_ps(p);
    hi = _mm512_loadu_ps(p + 16);
  } else if constexpr (T == KvType::kF16) {
    const uint16_t* p = static_cast<const uint16_t*>(row) + c;
    lo = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    hi = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16)));
  } else {
    // Word 2i + 1 of the result takes half i (lo) or 16 + i (hi); the even words are zeroed.
    const __m512i first = _mm512_set_epi16(15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0, 8, 0, 7,
                                           0, 6, 0, 5, 0, 4, 0, 3, 0, 2, 0, 1, 0, 0, 0);
    const __m512i second = _mm512_add_epi16(first, _mm512_set1_epi16(16));
    const __m512i w = _mm512_loadu_si512(static_cast<const uint16_t*>(row) + c);
    constexpr __mmask32 kOdd = 0xAAAAAAAAu;
    lo = _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(kOdd, first, w));
    hi = _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(kOdd, second, w));
  }
}

// Scores of C pairs (d = 32 C) for `heads` heads side by side in each row: keys outermost, so a
// row's heads are read in one sequential run. R keys of a head are widened into registers once
// (R * 2C <= 16 vectors) and each of the head's queries is multiplied against them; lane sums go
// four at a time through Reduce4, so a score's additions are the same whatever the tile around it.
// Each (keys, head) step fetches the same head of the next tile's same keys: the fetches go one
// for one with the loads, never in a burst (a burst of a tile's lines fills the core's miss
// buffers and stalls it: 38 % of this kernel's samples sat behind one).
template <KvType T, int C>
RADIX_AVX512 void ScoresAs(const float* q, int heads, int64_t nq, const void* base, float scale,
                           const int32_t* slots, int64_t nk, int64_t slot_stride, int64_t offset,
                           const int32_t* ahead, int64_t ahead_count, float* s) {
  constexpr int V = 2 * C;
  constexpr int R = V <= 4 ? 4 : 16 / V;
  constexpr int QB = 4 / R;  // queries per Reduce4
  constexpr int64_t d = 32 * C;
  constexpr int64_t head_bytes = d * static_cast<int64_t>(KvTypeSize(T));
  const __m512 factor = Fp8Factor<T>(scale);
  for (int64_t j = 0; j < nk; j += R) {
    for (int h = 0; h < heads; ++h) {
      const float* qh = q + h * nq * d;
      float* sh = s + h * nq * kKeyTile;
      __m512 k[R][V];
      for (int r = 0; r < R; ++r)
        FetchRow<T>(base, ahead, j + r, ahead_count, slot_stride, offset + h * d, head_bytes);
      for (int r = 0; r < R; ++r) {
        if (j + r < nk) {
          const void* row = RowAt<T>(base, slots, j + r, slot_stride, offset + h * d);
          for (int p = 0; p < C; ++p) {
            LoadPair<T>(row, 32 * p, factor, k[r][2 * p], k[r][2 * p + 1]);
          }
        } else {
          for (int v = 0; v < V; ++v) k[r][v] = _mm512_setzero_ps();
        }
      }
      for (int64_t i = 0; i < nq; i += QB) {
        __m512 acc[4];
        for (int b = 0; b < QB; ++b) {
          const float* qi = qh + std::min<int64_t>(i + b, nq - 1) * d;
          for (int r = 0; r < R; ++r) {
            // From zero, as the float GEMM's tiles: the same bits as a GEMM over gathered rows.
            __m512 a = _mm512_fmadd_ps(k[r][0], _mm512_loadu_ps(qi), _mm512_setzero_ps());
            for (int v = 1; v < V; ++v)
              a = _mm512_fmadd_ps(k[r][v], _mm512_loadu_ps(qi + 16 * v), a);
            acc[b * R + r] = a;
          }
        }
        const __m128 sums = Reduce4(acc[0], acc[1], acc[2], acc[3]);
        if constexpr (R == 4) {
          _mm_storeu_ps(sh + i * kKeyTile + j, sums);
        } else {
          alignas(16) float out[4];
          _mm_store_ps(out, sums);
          for (int b = 0; b < QB && i + b < nq; ++b)
            for (int r = 0; r < R; ++r) sh[(i + b) * kKeyTile + j + r] = out[b * R + r];
        }
      }
    }
  }
}

// Scores of many queries (a prefill block: its tokens times the query heads of a KV head), the
// bits of ScoresAs by another route, as the AVX2 variant's ScoresWideAs. ScoresAs sums a
// query-key pair in sixteen lanes (lane l: columns l, l + 16, ... from zero) and adds the lanes
// in Reduce4's tree, ((T0 + T2) + (T1 + T3)) with Tb = (A4b + A4b+2) + (A4b+1 + A4b+3); with many
// queries those horizontal sums per pair cost as much as the multiply-adds. Here each head's keys
// are widened and transposed once per tile (keys along the lanes), so one vector carries lane
// l's chain for sixteen keys and the tree is vertical additions, shared by every query.
// From 16 queries on (Intel Xeon with AMX, float_kernels_bench attention-tile, ns per key of the
// 1B shape's 8 heads, alternating with ScoresAs: 16 queries even at 147-157 against 147-166, 32
// queries 247-267 against 267-287, 64 queries 444-487 against 488-552, 128 queries 852-927
// against 854-1091).
inline constexpr int64_t kWideScoreQueries = 16;

// The 16 x 16 block v[row][lane] transposed in place: v[l] = lane l of the sixteen rows.
RADIX_AVX512 inline void Transpose16x16(__m512 (&v)[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  // u[4 g + k]: in 128-bit block b, column 4 b + k of rows 4 g .. 4 g + 3.
  __m512 u[16];
  for (int g = 0; g < 4; ++g) {
    const __m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  for (int k = 0; k < 4; ++k) {
    // Blocks 0 and 2 (x) or 1 and 3 (y) of groups 0 and 1, and of groups 2 and 3.
    const __m512 x01 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88);
    const __m512 y01 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xDD);
    const __m512 x23 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88);
    const __m512 y23 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xDD);
    v[k] = _mm512_shuffle_f32x4(x01, x23, 0x88);
    v[8 + k] = _mm512_shuffle_f32x4(x01, x23, 0xDD);
    v[4 + k] = _mm512_shuffle_f32x4(y01, y23, 0x88);
    v[12 + k] = _mm512_shuffle_f32x4(y01, y23, 0xDD);
  }
}

// Columns c .. c + 15 of a row as LoadPair gives them (the same values, one vector).
template <KvType T>
RADIX_AVX512 inline __m512 LoadSixteen(const void* row, int64_t c, __m512 factor) {
  if constexpr (T == KvType::kFp8E4M3 || T == KvType::kFp8E5M2) {
    const __m256i b = _mm256_cvtepu8_epi16(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(row) + c)));
    __m256i h;
    if constexpr (T == KvType::kFp8E5M2) {
      h = _mm256_slli_epi16(b, 8);
    } else {
      h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8),
                          _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7F)), 7));
    }
    return _mm512_mul_ps(_mm512_cvtph_ps(h), factor);
  } else {
    return LoadAs(row, T, c, 0xFFFF);  // the gather's widening
  }
}

// Keys [0, nk) of one head (element `offset` of their rows) widened as LoadPair widens them into
// kt[c * kKeyTile + j], c < 32 C, j below nk rounded up to 16 (the last key fills the rest); the
// same head of the next tile's keys is fetched on the way.
template <KvType T, int C>
RADIX_AVX512 void TransposeKeys(const void* base, const int32_t* slots, int64_t nk,
                                int64_t slot_stride, int64_t offset, const int32_t* ahead,
                                int64_t ahead_count, __m512 factor, float* kt) {
  constexpr int64_t kHeadBytes = 32 * C * static_cast<int64_t>(KvTypeSize(T));
  for (int64_t j0 = 0; j0 < nk; j0 += 16) {
    for (int64_t j = j0; j < j0 + 16; ++j)
      FetchRow<T>(base, ahead, j, ahead_count, slot_stride, offset, kHeadBytes);
    const void* r[16];
    for (int i = 0; i < 16; ++i)
      r[i] = RowAt<T>(base, slots, std::min<int64_t>(j0 + i, nk - 1), slot_stride, offset);
    for (int c = 0; c < 32 * C; c += 16) {
      __m512 v[16];
      for (int i = 0; i < 16; ++i) v[i] = LoadSixteen<T>(r[i], c, factor);
      Transpose16x16(v);
      for (int l = 0; l < 16; ++l) _mm512_store_ps(kt + (c + l) * kKeyTile + j0, v[l]);
    }
  }
}

// Lane l's chains (columns l, l + 16, ... from zero) of Q queries (x, D floats apart) against G
// vectors of sixteen transposed keys from kt.
template <int D, int Q, int G>
[[gnu::always_inline]] RADIX_AVX512 inline void LaneChains(const float* x, const float* kt, int l,
                                                           __m512 (&a)[Q][G]) {
  for (auto& row : a)
    for (__m512& chain : row) chain = _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int c0 = 0; c0 < D; c0 += 16) {
    __m512 k[G];
    for (int g = 0; g < G; ++g) k[g] = _mm512_load_ps(kt + (c0 + l) * kKeyTile + 16 * g);
    for (int i = 0; i < Q; ++i) {
      const __m512 xv = _mm512_set1_ps(x[i * D + c0 + l]);
      for (int g = 0; g < G; ++g) a[i][g] = _mm512_fmadd_ps(k[g], xv, a[i][g]);
    }
  }
}

// a += part (each lane sum's own operands: float addition commutes), and a into part.
template <int Q, int G>
[[gnu::always_inline]] RADIX_AVX512 inline void AddPart(__m512 (&a)[Q][G],
                                                        const float (&part)[Q][G][16]) {
  for (int i = 0; i < Q; ++i)
    for (int g = 0; g < G; ++g) a[i][g] = _mm512_add_ps(_mm512_load_ps(part[i][g]), a[i][g]);
}

template <int Q, int G>
[[gnu::always_inline]] RADIX_AVX512 inline void KeepPart(const __m512 (&a)[Q][G],
                                                         float (&part)[Q][G][16]) {
  for (int i = 0; i < Q; ++i)
    for (int g = 0; g < G; ++g) _mm512_store_ps(part[i][g], a[i][g]);
}

// Tb of Reduce4's tree into a: (A4b + A4b+2) + (A4b+1 + A4b+3), through two partial sums.
template <int D, int Q, int G>
[[gnu::always_inline]] RADIX_AVX512 inline void BlockSum(const float* x, const float* kt, int b,
                                                         __m512 (&a)[Q][G],
                                                         float (&part)[2][Q][G][16]) {
  LaneChains<D, Q, G>(x, kt, 4 * b, a);
  KeepPart<Q, G>(a, part[0]);
  LaneChains<D, Q, G>(x, kt, 4 * b + 2, a);
  AddPart<Q, G>(a, part[0]);
  KeepPart<Q, G>(a, part[0]);
  LaneChains<D, Q, G>(x, kt, 4 * b + 1, a);
  KeepPart<Q, G>(a, part[1]);
  LaneChains<D, Q, G>(x, kt, 4 * b + 3, a);
  AddPart<Q, G>(a, part[1]);
  AddPart<Q, G>(a, part[0]);
}

// Scores of Q queries against G vectors of sixteen transposed keys, into s (query i at
// s + i * kKeyTile): (T0 + T2) + (T1 + T3).
template <int D, int Q, int G>
RADIX_AVX512 void WideTile(const float* x, const float* kt, float* s) {
  alignas(64) float part[2][Q][G][16];
  alignas(64) float half[2][Q][G][16];  // T0 + T2, and T1
  __m512 a[Q][G];
  BlockSum<D, Q, G>(x, kt, 0, a, part);
  KeepPart<Q, G>(a, half[0]);
  BlockSum<D, Q, G>(x, kt, 2, a, part);
  AddPart<Q, G>(a, half[0]);
  KeepPart<Q, G>(a, half[0]);
  BlockSum<D, Q, G>(x, kt, 1, a, part);
  KeepPart<Q, G>(a, half[1]);
  BlockSum<D, Q, G>(x, kt, 3, a, part);
  AddPart<Q, G>(a, half[1]);
  AddPart<Q, G>(a, half[0]);
  for (int i = 0; i < Q; ++i)
    for (int g = 0; g < G; ++g) _mm512_storeu_ps(s + i * kKeyTile + 16 * g, a[i][g]);
}

// WideTile over `vectors` key vectors (at most kKeyTile / 16).
template <int D, int Q>
RADIX_AVX512 void WideRow(const float* x, const float* kt, int64_t vectors, float* s) {
  static_assert(kKeyTile == 64);
  switch (vectors) {
    case 4:
      return WideTile<D, Q, 4>(x, kt, s);
    case 3:
      return WideTile<D, Q, 3>(x, kt, s);
    case 2:
      return WideTile<D, Q, 2>(x, kt, s);
    default:
      return WideTile<D, Q, 1>(x, kt, s);
  }
}

// ScoresAs for nq >= kWideScoreQueries (see above). Writes s up to nk rounded up to 16 keys.
template <KvType T, int C>
RADIX_AVX512 void ScoresWideAs(const float* q, int heads, int64_t nq, const void* base, float scale,
                               const int32_t* slots, int64_t nk, int64_t slot_stride,
                               int64_t offset, const int32_t* ahead, int64_t ahead_count,
                               float* s) {
  constexpr int D = 32 * C;
  constexpr int Q = 4;
  alignas(64) static thread_local float kt[D * kKeyTile];
  const __m512 factor = Fp8Factor<T>(scale);
  const int64_t vectors = (nk + 15) / 16;
  for (int h = 0; h < heads; ++h) {
    TransposeKeys<T, C>(base, slots, nk, slot_stride, offset + h * D, ahead,
                        std::min(ahead_count, kKeyTile), factor, kt);
    const float* x = q + h * nq * D;
    float* sh = s + h * nq * kKeyTile;
    int64_t i = 0;
    for (; i + Q <= nq; i += Q) WideRow<D, Q>(x + i * D, kt, vectors, sh + i * kKeyTile);
    switch (nq - i) {
      case 3:
        WideRow<D, 3>(x + i * D, kt, vectors, sh + i * kKeyTile);
        break;
      case 2:
        WideRow<D, 2>(x + i * D, kt, vectors, sh + i * kKeyTile);
        break;
      case 1:
        WideRow<D, 1>(x + i * D, kt, vectors, sh + i * kKeyTile);
        break;
      default:
        break;
    }
  }
}

// Value sums of Q queries over CB pairs of columns starting at column c0 (2 CB vectors per row),
// keys [0, nk). Key j fetches the same columns of row ahead[j] (j < ahead_count).
template <KvType T, int CB, int Q>
RADIX_AVX512 void AccumulateBlock(const float* p, const void* base, __m512 factor,
                                  const int32_t* slots, int64_t nk, int64_t slot_stride,
                                  int64_t offset, int64_t d, int64_t c0, const int32_t* ahead,
                                  int64_t ahead_count, const float* rescale, float* acc) {
  constexpr int V = 2 * CB;
  constexpr int64_t bytes = 32 * CB * static_cast<int64_t>(KvTypeSize(T));
  __m512 a[Q][V];
  for (int q = 0; q < Q; ++q)
    for (int x = 0; x < V; ++x)
      a[q][x] = LoadSums(static_cast<__mmask16>(0xFFFF), acc + q * d + c0 + 16 * x, rescale, q);
  for (int64_t j = 0; j < nk; ++j) {
    FetchRow<T>(base, ahead, j, ahead_count, slot_stride, offset + c0, bytes);
    __m512 v[V];
    const void* row = RowAt<T>(base, slots, j, slot_stride, offset);
    for (int b = 0; b < CB; ++b) LoadPair<T>(row, c0 + 32 * b, factor, v[2 * b], v[2 * b + 1]);
    for (int q = 0; q < Q; ++q) {
      const __m512 w = _mm512_set1_ps(p[q * kKeyTile + j]);
      for (int x = 0; x < V; ++x) a[q][x] = _mm512_fmadd_ps(w, v[x], a[q][x]);
    }
  }
  for (int q = 0; q < Q; ++q)
    for (int x = 0; x < V; ++x) _mm512_storeu_ps(acc + q * d + c0 + 16 * x, a[q][x]);
}

// Value sums of `heads` heads, one head at a time over all the tile's keys (each head's
// accumulators are loaded and stored once). The next tile's rows are fetched as ScoresAs fetches
// them: a head's columns with the head's loads, by the first queries' pass.
template <KvType T, int C>
RADIX_AVX512 void AccumulateAs(const float* p, int heads, int64_t nq, const void* base, float scale,
                               const int32_t* slots, int64_t nk, int64_t slot_stride,
                               int64_t offset, const int32_t* ahead, int64_t ahead_count,
                               const float* rescale, float* const* acc) {
  constexpr int CB = C < 4 ? C : 4;   // at most 8 vectors of a row at once
  constexpr int Q = CB <= 2 ? 4 : 2;  // Q * 2 CB accumulators + 2 CB values
  constexpr int64_t d = 32 * C;
  const __m512 factor = Fp8Factor<T>(scale);
  for (int h = 0; h < heads; ++h) {
    const float* ph = p + h * nq * kKeyTile;
    const int64_t oh = offset + h * d;
    for (int64_t c0 = 0; c0 < d; c0 += 32 * CB) {
      for (int64_t i = 0; i < nq; i += Q) {
        const float* pi = ph + i * kKeyTile;
        float* ai = acc[h] + i * d;
        const float* ri = RescaleFrom(rescale, h * nq + i);
        // The first queries' pass fetches the next tile's same columns, a row per key.
        const int64_t na = i == 0 ? ahead_count : 0;
        switch (std::min<int64_t>(Q, nq - i)) {
          case 4:
            if constexpr (Q >= 4) {
              AccumulateBlock<T, CB, 4>(pi, base, factor, slots, nk, slot_stride, oh, d, c0, ahead,
                                        na, ri, ai);
              break;
            }
            [[fallthrough]];
          case 3:
            if constexpr (Q >= 3) {
              AccumulateBlock<T, CB, 3>(pi, base, factor, slots, nk, slot_stride, oh, d, c0, ahead,
                                        na, ri, ai);
              break;
            }
            [[fallthrough]];
          case 2:
            AccumulateBlock<T, CB, 2>(pi, base, factor, slots, nk, slot_stride, oh, d, c0, ahead,
                                      na, ri, ai);
            break;
          default:
            AccumulateBlock<T, CB, 1>(pi, base, factor, slots, nk, slot_stride, oh, d, c0, ahead,
                                      na, ri, ai);
            break;
        }
      }
    }
  }
}

// Value sums of many queries, the bits of AccumulateAs by another route: AccumulateAs widens a
// row's columns for every group of queries it serves, and the widening (two micro-operations per
// vector on Intel's multiply-add ports) costs a third of the multiply-adds. Here each head's rows
// are widened once per tile into vt (row j at vt + j * D) and the queries' sums read them from L1;
// every element still sums its keys in ascending order from the same accumulator.
// From 16 queries on (same runs as kWideScoreQueries: 16 queries 97-103 against 118-125 ns per
// key, 64 queries 330-340 against 470-486, 128 queries 636-657 against 943-973).
inline constexpr int64_t kWideValueQueries = 16;

// Rows [0, nk) of one head (element `offset` of their rows) widened into vt; the same head of the
// next tile's rows is fetched on the way.
template <KvType T, int C>
RADIX_AVX512 void WidenRows(const void* base, const int32_t* slots, int64_t nk, int64_t slot_stride,
                            int64_t offset, const int32_t* ahead, int64_t ahead_count,
                            __m512 factor, float* vt) {
  constexpr int64_t kHeadBytes = 32 * C * static_cast<int64_t>(KvTypeSize(T));
  for (int64_t j = 0; j < nk; ++j) {
    FetchRow<T>(base, ahead, j, ahead_count, slot_stride, offset, kHeadBytes);
    const void* row = RowAt<T>(base, slots, j, slot_stride, offset);
    for (int c = 0; c < 32 * C; c += 16)
      _mm512_store_ps(vt + j * 32 * C + c, LoadSixteen<T>(row, c, factor));
  }
}

// AccumulateAs for nq >= kWideValueQueries (see above): each head's rows widened, then the
// gathered rows' value sums over them.
template <KvType T, int C>
RADIX_AVX512 void AccumulateWideAs(const float* p, int heads, int64_t nq, const void* base,
                                   float scale, const int32_t* slots, int64_t nk,
                                   int64_t slot_stride, int64_t offset, const int32_t* ahead,
                                   int64_t ahead_count, const float* rescale, float* const* acc) {
  constexpr int D = 32 * C;
  alignas(64) static thread_local float vt[kKeyTile * D];
  const __m512 factor = Fp8Factor<T>(scale);
  for (int h = 0; h < heads; ++h) {
    WidenRows<T, C>(base, slots, nk, slot_stride, offset + h * D, ahead,
                    std::min(ahead_count, kKeyTile), factor, vt);
    Accumulate(p + h * nq * kKeyTile, nq, vt, D, nk, D, RescaleFrom(rescale, h * nq), acc[h]);
  }
}

// Dispatch on (type, d) for a kernel template K<T, C>.
template <template <KvType, int> class K, typename... Args>
RADIX_AVX512 void ForTypeAndDim(KvType type, int64_t d, Args... args) {
  auto by_dim = [&]<KvType T>() {
    switch (d) {
      case 32:
        return K<T, 1>::Run(args...);
      case 64:
        return K<T, 2>::Run(args...);
      case 128:
        return K<T, 4>::Run(args...);
      default:
        return K<T, 8>::Run(args...);
    }
  };
  switch (type) {
    case KvType::kF32:
      return by_dim.template operator()<KvType::kF32>();
    case KvType::kF16:
      return by_dim.template operator()<KvType::kF16>();
    case KvType::kFp8E4M3:
      return by_dim.template operator()<KvType::kFp8E4M3>();
    case KvType::kFp8E5M2:
      return by_dim.template operator()<KvType::kFp8E5M2>();
    default:
      return by_dim.template operator()<KvType::kBF16>();
  }
}

template <KvType T, int C>
struct ScoresKernel {
  RADIX_AVX512 static void Run(const float* q, int heads, int64_t nq, const void* base, float scale,
                               const int32_t* slots, int64_t nk, int64_t slot_stride,
                               int64_t offset, const int32_t* ahead, int64_t ahead_count,
                               float* s) {
    if (nq >= kWideScoreQueries) {
      ScoresWideAs<T, C>(q, heads, nq, base, scale, slots, nk, slot_stride, offset, ahead,
                         ahead_count, s);
    } else {
      ScoresAs<T, C>(q, heads, nq, base, scale, slots, nk, slot_stride, offset, ahead, ahead_count,
                     s);
    }
  }
};

template <KvType T, int C>
struct AccumulateKernel {
  RADIX_AVX512 static void Run(const float* p, int heads, int64_t nq, const void* base, float scale,
                               const int32_t* slots, int64_t nk, int64_t slot_stride,
                               int64_t offset, const int32_t* ahead, int64_t ahead_count,
                               const float* rescale, float* const* acc) {
    if (nq >= kWideValueQueries) {
      AccumulateWideAs<T, C>(p, heads, nq, base, scale, slots, nk, slot_stride, offset, ahead,
                             ahead_count, rescale, acc);
    } else {
      AccumulateAs<T, C>(p, heads, nq, base, scale, slots, nk, slot_stride, offset, ahead,
                         ahead_count, rescale, acc);
    }
  }
};

RADIX_AVX512 void Scores(const float* q, int heads, int64_t nq, const void* base, KvType type,
                         float scale, const int32_t* slots, int64_t nk, int64_t slot_stride,
                         int64_t offset, int64_t d, const int32_t* ahead, int64_t ahead_count,
                         float* s) {
  RADIX_CHECK(ReadsDirect(type, d));
  ForTypeAndDim<ScoresKernel>(type, d, q, heads, nq, base, scale, slots, nk, slot_stride, offset,
                              ahead, ahead_count, s);
}

RADIX_AVX512 void AccumulateRowsDirect(const float* p, int heads, int64_t nq, const void* base,
                                       KvType type, float scale, const int32_t* slots, int64_t nk,
                                       int64_t slot_stride, int64_t offset, int64_t d,
                                       const int32_t* ahead, int64_t ahead_count,
                                       const float* rescale, float* const* acc) {
  RADIX_CHECK(ReadsDirect(type, d));
  ForTypeAndDim<AccumulateKernel>(type, d, p, heads, nq, base, scale, slots, nk, slot_stride,
                                  offset, ahead, ahead_count, rescale, acc);
}

RADIX_AVX512 void Store(const float* src, int64_t count, KvType type, float scale, void* dst) {
  if (IsFp8(type) || type == KvType::kInt8) {
    return Avx2AttentionTable().store(src, count, type, scale, dst);
  }
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 m = Mask16(count - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, src + i);
    switch (type) {
      case KvType::kF32:
        _mm512_mask_storeu_ps(static_cast<float*>(dst) + i, m, v);
        break;
      case KvType::kBF16: {
        const __m512i bits = _mm512_castps_si512(v);
        const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
        const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        r = _mm512_mask_or_epi32(r, nan, bits, _mm512_set1_epi32(0x400000));
        _mm256_mask_storeu_epi16(static_cast<uint16_t*>(dst) + i, m,
                                 _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
        break;
      }
      case KvType::kF16:
        _mm256_mask_storeu_epi16(static_cast<uint16_t*>(dst) + i, m,
                                 _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        break;
      case KvType::kFp8E4M3:
      case KvType::kFp8E5M2:
      case KvType::kInt8:
        break;  // handled above
    }
  }
}

}  // namespace

const AttentionKernels& Avx512AttentionTable() {
  // The AVX2 scale_max: a tile's 64 scores are 8 vectors of 8, too few to gain from 16.
  static const AttentionKernels table{"avx512",
                                      Gather,
                                      ExpTile,
                                      Accumulate,
                                      Store,
                                      ReadsDirect,
                                      Scores,
                                      AccumulateRowsDirect,
                                      Avx2AttentionTable().scale_max};
  return table;
}

}  // namespace radixserve::kernels::x86

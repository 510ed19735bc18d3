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

// Two queries at a time share each V load; every element still sums j in ascending order.
template <int Q>
RADIX_AVX512 void AccumulateRows(const float* p, const float* v, int64_t ldv, int64_t nk, int64_t d,
                                 float* acc) {
  for (int64_t c0 = 0; c0 < d; c0 += 64) {
    __mmask16 m[4];
    __m512 a[Q][4];
    // Every loop over k and q unrolled whole: with one left rolled GCC kept a[1][4] in stack
    // slots and stored all four after every key's multiply-adds.
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      m[k] = c0 + 16 * k < d ? Mask16(d - c0 - 16 * k) : static_cast<__mmask16>(0);
#pragma GCC unroll 2
      for (int q = 0; q < Q; ++q) a[q][k] = _mm512_maskz_loadu_ps(m[k], acc + q * d + c0 + 16 * k);
    }
    for (int64_t j = 0; j < nk; ++j) {
      __m512 vv[4];
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) vv[k] = _mm512_maskz_loadu_ps(m[k], v + j * ldv + c0 + 16 * k);
#pragma GCC unroll 2
      for (int q = 0; q < Q; ++q) {
        const __m512 w = _mm512_set1_ps(p[q * kKeyTile + j]);
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) a[q][k] = _mm512_fmadd_ps(w, vv[k], a[q][k]);
      }
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
#pragma GCC unroll 2
      for (int q = 0; q < Q; ++q) _mm512_mask_storeu_ps(acc + q * d + c0 + 16 * k, m[k], a[q][k]);
  }
}

RADIX_AVX512 void Accumulate(const float* p, int64_t nq, const float* v, int64_t ldv, int64_t nk,
                             int64_t d, float* acc) {
  int64_t q = 0;
  for (; q + 2 <= nq; q += 2) AccumulateRows<2>(p + q * kKeyTile, v, ldv, nk, d, acc + q * d);
  if (q < nq) AccumulateRows<1>(p + q * kKeyTile, v, ldv, nk, d, acc + q * d);
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

// Value sums of Q queries over CB pairs of columns starting at column c0 (2 CB vectors per row),
// keys [0, nk). Key j fetches the same columns of row ahead[j] (j < ahead_count).
template <KvType T, int CB, int Q>
RADIX_AVX512 void AccumulateBlock(const float* p, const void* base, __m512 factor,
                                  const int32_t* slots, int64_t nk, int64_t slot_stride,
                                  int64_t offset, int64_t d, int64_t c0, const int32_t* ahead,
                                  int64_t ahead_count, float* acc) {
  constexpr int V = 2 * CB;
  constexpr int64_t bytes = 32 * CB * static_cast<int64_t>(KvTypeSize(T));
  __m512 a[Q][V];
  for (int q = 0; q < Q; ++q)
    for (int x = 0; x < V; ++x) a[q][x] = _mm512_loadu_ps(acc + q * d + c0 + 16 * x);
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
                               float* const* acc) {
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
        // The first queries' pass fetches the next tile's same columns, a row per key.
        const int64_t na = i == 0 ? ahead_count : 0;
        switch (std::min<int64_t>(Q, nq - i)) {
          case 4:
            if constexpr (Q >= 4) {
              AccumulateBlock<T, CB, 4>(pi, base, factor, slots, nk, slot_stride, oh, d, c0, ahead,
                                        na, ai);
              break;
            }
            [[fallthrough]];
          case 3:
            if constexpr (Q >= 3) {
              AccumulateBlock<T, CB, 3>(pi, base, factor, slots, nk, slot_stride, oh, d, c0, ahead,
                                        na, ai);
              break;
            }
            [[fallthrough]];
          case 2:
            AccumulateBlock<T, CB, 2>(pi, base, factor, slots, nk, slot_stride, oh, d, c0, ahead,
                                      na, ai);
            break;
          default:
            AccumulateBlock<T, CB, 1>(pi, base, factor, slots, nk, slot_stride, oh, d, c0, ahead,
                                      na, ai);
            break;
        }
      }
    }
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
    ScoresAs<T, C>(q, heads, nq, base, scale, slots, nk, slot_stride, offset, ahead, ahead_count,
                   s);
  }
};

template <KvType T, int C>
struct AccumulateKernel {
  RADIX_AVX512 static void Run(const float* p, int heads, int64_t nq, const void* base, float scale,
                               const int32_t* slots, int64_t nk, int64_t slot_stride,
                               int64_t offset, const int32_t* ahead, int64_t ahead_count,
                               float* const* acc) {
    AccumulateAs<T, C>(p, heads, nq, base, scale, slots, nk, slot_stride, offset, ahead,
                       ahead_count, acc);
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
                                       float* const* acc) {
  RADIX_CHECK(ReadsDirect(type, d));
  ForTypeAndDim<AccumulateKernel>(type, d, p, heads, nq, base, scale, slots, nk, slot_stride,
                                  offset, ahead, ahead_count, acc);
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

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

RADIX_AVX2 void Accumulate(const float* p, int64_t nq, const float* v, int64_t ldv, int64_t nk,
                           int64_t d, float* acc) {
  for (int64_t q = 0; q < nq; ++q) {
    const float* pq = p + q * kKeyTile;
    float* aq = acc + q * d;
    int64_t c0 = 0;
    for (; c0 + 32 <= d; c0 += 32) {
      __m256 a0 = _mm256_loadu_ps(aq + c0), a1 = _mm256_loadu_ps(aq + c0 + 8);
      __m256 a2 = _mm256_loadu_ps(aq + c0 + 16), a3 = _mm256_loadu_ps(aq + c0 + 24);
      for (int64_t j = 0; j < nk; ++j) {
        const __m256 w = _mm256_set1_ps(pq[j]);
        const float* vj = v + j * ldv + c0;
        a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj), a0);
        a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 8), a1);
        a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 16), a2);
        a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 24), a3);
      }
      _mm256_storeu_ps(aq + c0, a0);
      _mm256_storeu_ps(aq + c0 + 8, a1);
      _mm256_storeu_ps(aq + c0 + 16, a2);
      _mm256_storeu_ps(aq + c0 + 24, a3);
    }
    for (; c0 + 8 <= d; c0 += 8) {
      __m256 a = _mm256_loadu_ps(aq + c0);
      for (int64_t j = 0; j < nk; ++j) {
        a = _mm256_fmadd_ps(_mm256_set1_ps(pq[j]), _mm256_loadu_ps(v + j * ldv + c0), a);
      }
      _mm256_storeu_ps(aq + c0, a);
    }
    for (; c0 < d; ++c0) {
      float a = aq[c0];
      for (int64_t j = 0; j < nk; ++j) a = std::fma(pq[j], v[j * ldv + c0], a);
      aq[c0] = a;
    }
  }
}

// Direct reads (AttentionKernels::scores and accumulate_rows), the AVX2 form of the AVX-512
// kernels: a row's columns are widened 8 at a time as Load8 widens them, so the values are the
// gather's, and summed as the AVX2 float GEMM sums a gathered row against a token (one 8-lane
// accumulator from zero in column order, then Sum8's additions), so the bits are too.

// Scores of two keys against four queries at a time (8 accumulators, 2 row vectors and the
// queries' vectors from memory), the eight lane sums at once through Sum8x8. Keys outermost, a
// row's heads in turn, each step fetching the same head of the next tile's same keys.
template <KvType T>
RADIX_AVX2 void ScoresAs(const float* q, int heads, int64_t nq, const void* base, float scale,
                         const int32_t* slots, int64_t nk, int64_t slot_stride, int64_t offset,
                         int64_t d, const int32_t* ahead, int64_t ahead_count, float* s) {
  const int64_t head_bytes = d * static_cast<int64_t>(KvTypeSize(T));
  for (int64_t j = 0; j < nk; j += 2) {
    const int64_t j1 = std::min(j + 1, nk - 1);  // a lone last key is computed twice
    for (int h = 0; h < heads; ++h) {
      FetchRow<T>(base, ahead, j, ahead_count, slot_stride, offset + h * d, head_bytes);
      FetchRow<T>(base, ahead, j + 1, ahead_count, slot_stride, offset + h * d, head_bytes);
      const void* row0 = RowAt<T>(base, slots, j, slot_stride, offset + h * d);
      const void* row1 = RowAt<T>(base, slots, j1, slot_stride, offset + h * d);
      const float* qh = q + h * nq * d;
      float* sh = s + h * nq * kKeyTile;
      for (int64_t i = 0; i < nq; i += 4) {
        const float* qi[4];
        for (int b = 0; b < 4; ++b) qi[b] = qh + std::min<int64_t>(i + b, nq - 1) * d;
        __m256 acc[8];  // acc[2 b + r]: query i + b, key j + r
        for (__m256& a : acc) a = _mm256_setzero_ps();
        for (int64_t c = 0; c < d; c += 8) {
          const __m256 k0 = Load8(row0, T, scale, c), k1 = Load8(row1, T, scale, c);
          for (int b = 0; b < 4; ++b) {
            const __m256 x = _mm256_loadu_ps(qi[b] + c);
            acc[2 * b] = _mm256_fmadd_ps(k0, x, acc[2 * b]);
            acc[2 * b + 1] = _mm256_fmadd_ps(k1, x, acc[2 * b + 1]);
          }
        }
        float sums[8];
        Sum8x8(acc, sums);
        for (int b = 0; b < 4 && i + b < nq; ++b) {
          sh[(i + b) * kKeyTile + j] = sums[2 * b];
          if (j + 1 < nk) sh[(i + b) * kKeyTile + j + 1] = sums[2 * b + 1];
        }
      }
    }
  }
}

// Value sums of Q queries over 16 columns from c (Q * 2 accumulators), keys [0, nk); key j
// fetches the same columns of row ahead[j] (j < ahead_count).
template <KvType T, int Q>
RADIX_AVX2 void AccumulateBlock(const float* p, const void* base, float scale, const int32_t* slots,
                                int64_t nk, int64_t slot_stride, int64_t offset, int64_t d,
                                int64_t c, const int32_t* ahead, int64_t ahead_count, float* acc) {
  __m256 a[Q][2];
  for (int q = 0; q < Q; ++q)
    for (int x = 0; x < 2; ++x) a[q][x] = _mm256_loadu_ps(acc + q * d + c + 8 * x);
  for (int64_t j = 0; j < nk; ++j) {
    FetchRow<T>(base, ahead, j, ahead_count, slot_stride, offset + c,
                16 * static_cast<int64_t>(KvTypeSize(T)));
    const void* row = RowAt<T>(base, slots, j, slot_stride, offset);
    const __m256 v0 = Load8(row, T, scale, c), v1 = Load8(row, T, scale, c + 8);
    for (int q = 0; q < Q; ++q) {
      const __m256 w = _mm256_set1_ps(p[q * kKeyTile + j]);
      a[q][0] = _mm256_fmadd_ps(w, v0, a[q][0]);
      a[q][1] = _mm256_fmadd_ps(w, v1, a[q][1]);
    }
  }
  for (int q = 0; q < Q; ++q)
    for (int x = 0; x < 2; ++x) _mm256_storeu_ps(acc + q * d + c + 8 * x, a[q][x]);
}

// Value sums of `heads` heads, one head at a time over the tile's keys; the first queries' pass
// over each 16 columns fetches the next tile's same columns.
template <KvType T>
RADIX_AVX2 void AccumulateAs(const float* p, int heads, int64_t nq, const void* base, float scale,
                             const int32_t* slots, int64_t nk, int64_t slot_stride, int64_t offset,
                             int64_t d, const int32_t* ahead, int64_t ahead_count,
                             float* const* acc) {
  for (int h = 0; h < heads; ++h) {
    const float* ph = p + h * nq * kKeyTile;
    const int64_t oh = offset + h * d;
    for (int64_t c = 0; c < d; c += 16) {
      for (int64_t i = 0; i < nq; i += 4) {
        const float* pi = ph + i * kKeyTile;
        float* ai = acc[h] + i * d;
        const int64_t na = i == 0 ? ahead_count : 0;
        switch (std::min<int64_t>(4, nq - i)) {
          case 4:
            AccumulateBlock<T, 4>(pi, base, scale, slots, nk, slot_stride, oh, d, c, ahead, na, ai);
            break;
          case 3:
            AccumulateBlock<T, 3>(pi, base, scale, slots, nk, slot_stride, oh, d, c, ahead, na, ai);
            break;
          case 2:
            AccumulateBlock<T, 2>(pi, base, scale, slots, nk, slot_stride, oh, d, c, ahead, na, ai);
            break;
          default:
            AccumulateBlock<T, 1>(pi, base, scale, slots, nk, slot_stride, oh, d, c, ahead, na, ai);
            break;
        }
      }
    }
  }
}

// Calls K<T>::Run(args...) for the cache's element type (one of ReadsDirect's).
template <template <KvType> class K, typename... Args>
RADIX_AVX2 void ForType(KvType type, Args... args) {
  switch (type) {
    case KvType::kF32:
      return K<KvType::kF32>::Run(args...);
    case KvType::kF16:
      return K<KvType::kF16>::Run(args...);
    case KvType::kFp8E4M3:
      return K<KvType::kFp8E4M3>::Run(args...);
    case KvType::kFp8E5M2:
      return K<KvType::kFp8E5M2>::Run(args...);
    default:
      return K<KvType::kBF16>::Run(args...);
  }
}

template <KvType T>
struct ScoresKernel {
  template <typename... Args>
  RADIX_AVX2 static void Run(Args... args) {
    ScoresAs<T>(args...);
  }
};

template <KvType T>
struct AccumulateKernel {
  template <typename... Args>
  RADIX_AVX2 static void Run(Args... args) {
    AccumulateAs<T>(args...);
  }
};

RADIX_AVX2 void Scores(const float* q, int heads, int64_t nq, const void* base, KvType type,
                       float scale, const int32_t* slots, int64_t nk, int64_t slot_stride,
                       int64_t offset, int64_t d, const int32_t* ahead, int64_t ahead_count,
                       float* s) {
  RADIX_CHECK(ReadsDirect(type, d));
  ForType<ScoresKernel>(type, q, heads, nq, base, scale, slots, nk, slot_stride, offset, d, ahead,
                        ahead_count, s);
}

RADIX_AVX2 void AccumulateRowsDirect(const float* p, int heads, int64_t nq, const void* base,
                                     KvType type, float scale, const int32_t* slots, int64_t nk,
                                     int64_t slot_stride, int64_t offset, int64_t d,
                                     const int32_t* ahead, int64_t ahead_count, float* const* acc) {
  RADIX_CHECK(ReadsDirect(type, d));
  ForType<AccumulateKernel>(type, p, heads, nq, base, scale, slots, nk, slot_stride, offset, d,
                            ahead, ahead_count, acc);
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
  static const AttentionKernels table{"avx2", Gather,      ExpTile, Accumulate,
                                      Store,  ReadsDirect, Scores,  AccumulateRowsDirect};
  return table;
}

}  // namespace radixserve::kernels::x86

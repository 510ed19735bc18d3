// AVX-512 primitives of the blocked paged attention (see kernels/attention.h): KV row gathers with
// bf16/f16 widening, the exp of a score tile, and the probability-weighted V accumulation.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "kernels/attention.h"
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

RADIX_AVX512 inline void PrefetchRow(const void* base, KvType type, const int32_t* slots, int64_t i,
                                     int64_t count, int64_t slot_stride, int64_t offset,
                                     int64_t d) {
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
    for (int k = 0; k < 4; ++k) {
      m[k] = c0 + 16 * k < d ? Mask16(d - c0 - 16 * k) : static_cast<__mmask16>(0);
      for (int q = 0; q < Q; ++q) a[q][k] = _mm512_maskz_loadu_ps(m[k], acc + q * d + c0 + 16 * k);
    }
    for (int64_t j = 0; j < nk; ++j) {
      __m512 vv[4];
      for (int k = 0; k < 4; ++k) vv[k] = _mm512_maskz_loadu_ps(m[k], v + j * ldv + c0 + 16 * k);
      for (int q = 0; q < Q; ++q) {
        const __m512 w = _mm512_set1_ps(p[q * kKeyTile + j]);
        for (int k = 0; k < 4; ++k) a[q][k] = _mm512_fmadd_ps(w, vv[k], a[q][k]);
      }
    }
    for (int k = 0; k < 4; ++k)
      for (int q = 0; q < Q; ++q) _mm512_mask_storeu_ps(acc + q * d + c0 + 16 * k, m[k], a[q][k]);
  }
}

RADIX_AVX512 void Accumulate(const float* p, int64_t nq, const float* v, int64_t ldv, int64_t nk,
                             int64_t d, float* acc) {
  int64_t q = 0;
  for (; q + 2 <= nq; q += 2) AccumulateRows<2>(p + q * kKeyTile, v, ldv, nk, d, acc + q * d);
  if (q < nq) AccumulateRows<1>(p + q * kKeyTile, v, ldv, nk, d, acc + q * d);
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
  static const AttentionKernels table{"avx512", Gather, ExpTile, Accumulate, Store};
  return table;
}

}  // namespace radixserve::kernels::x86

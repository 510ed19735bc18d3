// Test builds only (RADIX_EMULATE_AVX512, see simd.h): the AVX-512 intrinsics the kernels use,
// from SIMDe's portable implementations, plus the few SIMDe lacks, written here lane by lane from
// the instruction set reference. With these the AVX-512 kernels' unit tests run on CPUs without
// AVX-512, so a change to them is checked on every machine, not only on one that has it. The
// files that use them are compiled with -mavx2 -mfma -mf16c (src/kernels/CMakeLists.txt), so
// SIMDe builds each 512-bit operation from two AVX2 ones, and fused multiply-adds stay fused (the
// same bits as the real instructions). GCC only: clang rejects SIMDe's 512-bit vector arguments
// in code compiled without AVX-512.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

// The AVX-512 names only: _mm256_* and the rest stay the compiler's own, so the AVX2 kernels
// built beside these are the real ones.
#define SIMDE_X86_AVX512F_ENABLE_NATIVE_ALIASES
#define SIMDE_X86_AVX512BW_ENABLE_NATIVE_ALIASES
#define SIMDE_X86_AVX512VL_ENABLE_NATIVE_ALIASES
#define SIMDE_X86_AVX512DQ_ENABLE_NATIVE_ALIASES
#define SIMDE_X86_AVX512CD_ENABLE_NATIVE_ALIASES
#define SIMDE_X86_AVX512VNNI_ENABLE_NATIVE_ALIASES
#define SIMDE_X86_AVX512BF16_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

namespace radixserve::kernels::x86::emulated {

// Lanes of type Lane, N of them, from p where mask bit i is set, zero elsewhere; the masked-off
// lanes are not read (no fault past the end), as the real masked loads.
template <typename V, typename Lane, int N, typename Mask>
[[gnu::always_inline]] inline V MaskzLoadu(Mask k, const void* p) {
  Lane lanes[N] = {};
  const Lane* s = static_cast<const Lane*>(p);
  for (int i = 0; i < N; ++i) {
    if ((k >> i) & 1) lanes[i] = s[i];
  }
  V r;
  std::memcpy(&r, lanes, sizeof(r));
  return r;
}

// Lanes i of v whose mask bit is set into p; nothing else written.
template <typename Lane, int N, typename V, typename Mask>
[[gnu::always_inline]] inline void MaskStoreu(void* p, Mask k, V v) {
  Lane lanes[N];
  std::memcpy(lanes, &v, sizeof(lanes));
  Lane* d = static_cast<Lane*>(p);
  for (int i = 0; i < N; ++i) {
    if ((k >> i) & 1) d[i] = lanes[i];
  }
}

// A 512-bit vector from two 256-bit halves, and half h (0: lanes 0-7) of one.
template <typename V, typename Half>
[[gnu::always_inline]] inline V Join(Half lo, Half hi) {
  V r;
  std::memcpy(reinterpret_cast<char*>(&r), &lo, 32);
  std::memcpy(reinterpret_cast<char*>(&r) + 32, &hi, 32);
  return r;
}

template <typename Half, typename V>
[[gnu::always_inline]] inline Half HalfOf(V v, int h) {
  Half r;
  std::memcpy(&r, reinterpret_cast<const char*>(&v) + 32 * h, 32);
  return r;
}

[[gnu::always_inline]] inline __m256 PsHalf(simde__m512 v, int h) { return HalfOf<__m256>(v, h); }

[[gnu::always_inline]] inline simde__m512i CvtEpu16Epi32(__m256i v) {
  return Join<simde__m512i>(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(v)),
                            _mm256_cvtepu16_epi32(_mm256_extracti128_si256(v, 1)));
}

[[gnu::always_inline]] inline simde__m512 CvtEpi32Ps(simde__m512i v) {
  return Join<simde__m512>(_mm256_cvtepi32_ps(HalfOf<__m256i>(v, 0)),
                           _mm256_cvtepi32_ps(HalfOf<__m256i>(v, 1)));
}

[[gnu::always_inline]] inline simde__m512 CvtPhPs(__m256i v) {
  return Join<simde__m512>(_mm256_cvtph_ps(_mm256_castsi256_si128(v)),
                           _mm256_cvtph_ps(_mm256_extracti128_si256(v, 1)));
}

[[gnu::always_inline]] inline simde__m512d CvtPsPd(__m256 v) {
  return Join<simde__m512d>(_mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                            _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

// Rounded by the current rounding mode (nearest even), out-of-range lanes 0x80000000: as
// VCVTPS2DQ at either width.
[[gnu::always_inline]] inline simde__m512i CvtPsEpi32(simde__m512 v) {
  return Join<simde__m512i>(_mm256_cvtps_epi32(PsHalf(v, 0)), _mm256_cvtps_epi32(PsHalf(v, 1)));
}

[[gnu::always_inline]] inline simde__m512i CvtEpu8Epi32(__m128i v) {
  return Join<simde__m512i>(_mm256_cvtepu8_epi32(v), _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));
}

[[gnu::always_inline]] inline simde__m512i CvtEpi8Epi32(__m128i v) {
  return Join<simde__m512i>(_mm256_cvtepi8_epi32(v), _mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));
}

[[gnu::always_inline]] inline simde__m512i CvtEpu8Epi16(__m256i v) {
  return Join<simde__m512i>(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(v)),
                            _mm256_cvtepu8_epi16(_mm256_extracti128_si256(v, 1)));
}

// VPMOVDW / VPMOVDB: each dword lane's low 16 / 8 bits (truncation, no saturation).
template <typename V, typename Lane>
[[gnu::always_inline]] inline V Narrow(simde__m512i v) {
  uint32_t in[16];
  std::memcpy(in, &v, 64);
  Lane out[16];
  for (int i = 0; i < 16; ++i) out[i] = static_cast<Lane>(in[i]);
  V r;
  std::memcpy(&r, out, sizeof(r));
  return r;
}

// GCC's own addition tree (avx512fintrin.h): the halves, the quarters, lanes i and i + 2, then
// lanes 0 and 1.
[[gnu::always_inline]] inline float ReduceAddPs(simde__m512 v) {
  const __m256 t3 = _mm256_add_ps(PsHalf(v, 1), PsHalf(v, 0));
  const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
  const __m128 t8 = _mm_add_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(t8) + _mm_cvtss_f32(_mm_shuffle_ps(t8, t8, _MM_SHUFFLE(0, 1, 0, 1)));
}

[[gnu::always_inline]] inline float ReduceMaxPs(simde__m512 v) {
  const __m256 t3 = _mm256_max_ps(PsHalf(v, 1), PsHalf(v, 0));
  const __m128 t6 = _mm_max_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
  const __m128 t8 = _mm_max_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(_mm_max_ps(t8, _mm_shuffle_ps(t8, t8, _MM_SHUFFLE(0, 1, 0, 1))));
}

[[gnu::always_inline]] inline float ReduceMinPs(simde__m512 v) {
  const __m256 t3 = _mm256_min_ps(PsHalf(v, 1), PsHalf(v, 0));
  const __m128 t6 = _mm_min_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
  const __m128 t8 = _mm_min_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(_mm_min_ps(t8, _mm_shuffle_ps(t8, t8, _MM_SHUFFLE(0, 1, 0, 1))));
}

// GCC's tree again: the halves, the quarters, then lanes 0 and 1.
[[gnu::always_inline]] inline double ReduceAddPd(simde__m512d v) {
  const __m256d t3 = _mm256_add_pd(HalfOf<__m256d>(v, 1), HalfOf<__m256d>(v, 0));
  const __m128d t6 = _mm_add_pd(_mm256_extractf128_pd(t3, 1), _mm256_castpd256_pd128(t3));
  return _mm_cvtsd_f64(t6) + _mm_cvtsd_f64(_mm_unpackhi_pd(t6, t6));
}

// Integer lane sum (wrapping, so the order does not matter).
[[gnu::always_inline]] inline int ReduceAddEpi32(simde__m512i v) {
  uint32_t lanes[16];
  std::memcpy(lanes, &v, 64);
  uint32_t sum = 0;
  for (uint32_t lane : lanes) sum += lane;
  return static_cast<int>(sum);
}

// 16 dwords (floats or integers: V), lane i from base + index[i] * scale.
template <typename V>
[[gnu::always_inline]] inline V I32Gather(simde__m512i index, const void* base, int scale) {
  V r;
  int32_t at[16];
  std::memcpy(at, &index, 64);
  const char* b = static_cast<const char*>(base);
  for (int i = 0; i < 16; ++i) {
    std::memcpy(reinterpret_cast<char*>(&r) + 4 * i, b + static_cast<int64_t>(at[i]) * scale, 4);
  }
  return r;
}

// VDPBF16PS as the instruction set reference gives it: per lane, the odd pair's product is added
// first, then the even pair's, each addition rounded to nearest even; input denormals read as
// zero and output denormals are flushed to zero. (SIMDe adds the even product first.)
[[gnu::always_inline]] inline float FlushDenormal(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7F800000u) == 0) bits &= 0x80000000u;
  std::memcpy(&f, &bits, 4);
  return f;
}

[[gnu::always_inline]] inline float Bf16Value(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return FlushDenormal(f);
}

template <typename Bf16Vector>
[[gnu::always_inline]] inline simde__m512 DpBf16Ps(simde__m512 acc, Bf16Vector a, Bf16Vector b) {
  uint16_t x[32], y[32];
  std::memcpy(x, &a, 64);
  std::memcpy(y, &b, 64);
  for (int i = 0; i < 16; ++i) {
    float s = acc[i];
    s = FlushDenormal(std::fma(Bf16Value(x[2 * i + 1]), Bf16Value(y[2 * i + 1]), s));
    s = FlushDenormal(std::fma(Bf16Value(x[2 * i]), Bf16Value(y[2 * i]), s));
    acc[i] = s;
  }
  return acc;
}

}  // namespace radixserve::kernels::x86::emulated

#undef _mm512_maskz_loadu_ps
#define _mm512_maskz_loadu_ps(k, p) \
  radixserve::kernels::x86::emulated::MaskzLoadu<simde__m512, float, 16>(k, p)
#undef _mm512_mask_storeu_ps
#define _mm512_mask_storeu_ps(p, k, v) \
  radixserve::kernels::x86::emulated::MaskStoreu<float, 16>(p, k, v)
#undef _mm256_maskz_loadu_epi16
#define _mm256_maskz_loadu_epi16(k, p) \
  radixserve::kernels::x86::emulated::MaskzLoadu<__m256i, uint16_t, 16>(k, p)
#undef _mm512_cvtepu16_epi32
#define _mm512_cvtepu16_epi32(v) radixserve::kernels::x86::emulated::CvtEpu16Epi32(v)
#undef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps(v) radixserve::kernels::x86::emulated::CvtEpi32Ps(v)
#undef _mm512_cvtph_ps
#define _mm512_cvtph_ps(v) radixserve::kernels::x86::emulated::CvtPhPs(v)
#undef _mm512_cvtps_ph
#define _mm512_cvtps_ph(v, rounding)                                                            \
  _mm256_set_m128i(_mm256_cvtps_ph(radixserve::kernels::x86::emulated::PsHalf(v, 1), rounding), \
                   _mm256_cvtps_ph(radixserve::kernels::x86::emulated::PsHalf(v, 0), rounding))
#undef _mm512_reduce_add_ps
#define _mm512_reduce_add_ps(v) radixserve::kernels::x86::emulated::ReduceAddPs(v)
#undef _mm512_reduce_max_ps
#define _mm512_reduce_max_ps(v) radixserve::kernels::x86::emulated::ReduceMaxPs(v)
#undef _mm512_reduce_min_ps
#define _mm512_reduce_min_ps(v) radixserve::kernels::x86::emulated::ReduceMinPs(v)
#undef _mm512_i32gather_ps
#define _mm512_i32gather_ps(index, base, scale) \
  radixserve::kernels::x86::emulated::I32Gather<simde__m512>(index, base, scale)
#undef _mm512_i32gather_epi32
#define _mm512_i32gather_epi32(index, base, scale) \
  radixserve::kernels::x86::emulated::I32Gather<simde__m512i>(index, base, scale)
#undef _mm512_dpbf16_ps
#define _mm512_dpbf16_ps(acc, a, b) radixserve::kernels::x86::emulated::DpBf16Ps(acc, a, b)
#undef _mm256_mask_storeu_epi16
#define _mm256_mask_storeu_epi16(p, k, v) \
  radixserve::kernels::x86::emulated::MaskStoreu<uint16_t, 16>(p, k, v)
#undef _mm512_cvtps_pd
#define _mm512_cvtps_pd(v) radixserve::kernels::x86::emulated::CvtPsPd(v)
#undef _mm512_reduce_add_pd
#define _mm512_reduce_add_pd(v) radixserve::kernels::x86::emulated::ReduceAddPd(v)
#undef _mm512_cvtps_epi32
#define _mm512_cvtps_epi32(v) radixserve::kernels::x86::emulated::CvtPsEpi32(v)
#undef _mm512_cvtepu8_epi32
#define _mm512_cvtepu8_epi32(v) radixserve::kernels::x86::emulated::CvtEpu8Epi32(v)
#undef _mm512_cvtepi32_epi16
#define _mm512_cvtepi32_epi16(v) radixserve::kernels::x86::emulated::Narrow<__m256i, uint16_t>(v)
#undef _mm512_cvtepi32_epi8
#define _mm512_cvtepi32_epi8(v) radixserve::kernels::x86::emulated::Narrow<__m128i, uint8_t>(v)
#undef _mm512_cvtepu8_epi16
#define _mm512_cvtepu8_epi16(v) radixserve::kernels::x86::emulated::CvtEpu8Epi16(v)
#undef _mm512_cvtepi8_epi32
#define _mm512_cvtepi8_epi32(v) radixserve::kernels::x86::emulated::CvtEpi8Epi32(v)
#undef _mm512_reduce_add_epi32
#define _mm512_reduce_add_epi32(v) radixserve::kernels::x86::emulated::ReduceAddEpi32(v)
#undef _mm512_extractf32x8_ps
#define _mm512_extractf32x8_ps(v, half) radixserve::kernels::x86::emulated::PsHalf(v, half)
#undef _mm512_maskz_loadu_epi16
#define _mm512_maskz_loadu_epi16(k, p) \
  radixserve::kernels::x86::emulated::MaskzLoadu<simde__m512i, uint16_t, 32>(k, p)
// SIMDe has the operation but no native alias for it.
#undef _mm512_shuffle_f32x4
#define _mm512_shuffle_f32x4(a, b, imm8) simde_mm512_shuffle_f32x4(a, b, imm8)

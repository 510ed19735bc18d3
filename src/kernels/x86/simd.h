// The x86 instruction-set levels the kernels are written for: one target attribute per level, the
// runtime check that must pass before any function of that level runs, and the math both levels
// share (one Exp per level).
//
//   RADIX_AVX2         AVX2 + FMA + F16C (Haswell, Zen 1 and later)
//   RADIX_AVX512       AVX-512 F/BW/VL/DQ + FMA + F16C (Skylake-SP, Zen 4 and later)
//   RADIX_AVX512_VNNI  RADIX_AVX512 + VNNI (Cascade Lake, Zen 4)
//   RADIX_AVX512_BF16  RADIX_AVX512 + BF16 (Cooper Lake, Sapphire Rapids, Zen 4)
// A file compiles its kernels with these attributes (the rest of the build stays baseline x86-64),
// and a dispatcher hands them out only when the matching CpuHas*() is true.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/half.h"

#define RADIX_AVX2 __attribute__((target("avx2,fma,f16c")))
#if defined(RADIX_EMULATE_AVX512)
// A test build (radix_kernels_avx512emu; its files with 512-bit intrinsics are compiled with
// -mavx2 -mfma -mf16c): the AVX-512 intrinsics are SIMDe's portable ones, so the AVX-512 kernels
// run, slowly, on any AVX2 CPU.
#include "kernels/x86/avx512_emulation.h"
#define RADIX_AVX512
#define RADIX_AVX512_VNNI
#define RADIX_AVX512_BF16
#else
#define RADIX_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define RADIX_AVX512_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni")))
#define RADIX_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512bf16")))
#endif

namespace radixserve::kernels::x86 {

// Fetches the cache line at p into L2 (prefetcht1), the one software fetch the kernels use for
// streams they read ahead (weight panels, the next panel, the next tile's K/V rows). Not into L1:
// a fetch into L1 holds one of the core's few L1 miss buffers for the whole trip to memory, and
// once they are all taken the next fetch stalls the core, so the arithmetic waits on memory
// instead of overlapping it (perf put 70 % of a 1B Q4_K_M decode's Q4_K tile samples after a
// prefetcht0; docs/performance.md, session 39). Always inlined, as must be every helper that only
// fetches: GCC counts a prefetch as free of side effects, finds an out-of-line copy pure and
// deletes its calls (which is what happened to the attention's fetches until 2026-11-30).
[[gnu::always_inline]] inline void FetchL2(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
}
// Into L1, for a line a FetchL2 further ahead has already brought into L2: the miss buffer is then
// held only for the short trip from L2, which the note above does not forbid.
[[gnu::always_inline]] inline void FetchL1(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
}

// 64 bytes at p, loaded once into a register the compiler must keep. A plain load that feeds
// several instructions (a code register's low and high nibbles, Q6_K's high bits feeding four
// code registers) may instead be folded into each one's memory operand: GCC did so in the K-quant
// one-token tiles once their loop got simpler, and every fold is another 64-byte load (Zen 4 has
// two load ports at that width), which cost those tiles 10-14 % in L3 (session 63).
[[gnu::always_inline]] RADIX_AVX512 inline __m512i LoadKept(const void* p) {
  __m512i v = _mm512_loadu_si512(p);
#if !defined(RADIX_EMULATE_AVX512)
  asm("" : "+v"(v));
#endif
  return v;
}

inline bool CpuHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && CpuHasF16c();
}

#if defined(RADIX_EMULATE_AVX512)
inline bool CpuHasAvx512() { return CpuHasAvx2(); }
inline bool CpuHasAvx512Vnni() { return CpuHasAvx512(); }
inline bool CpuHasAvx512Bf16() { return CpuHasAvx512(); }
#else
inline bool CpuHasAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("fma") && CpuHasF16c();
}

inline bool CpuHasAvx512Vnni() { return CpuHasAvx512() && __builtin_cpu_supports("avx512vnni"); }

inline bool CpuHasAvx512Bf16() { return CpuHasAvx512() && __builtin_cpu_supports("avx512bf16"); }
#endif

// exp(x): inputs clamped to [-87, 88] (so 2^n stays a normal float), n = round(x / ln2),
// r = x - n ln2 in two parts (Cody-Waite), e^r by a degree-6 polynomial (Cephes coefficients),
// times 2^n. Relative error about 2e-7; exp(-87) ~ 1.6e-38 stands in for 0 below the clamp,
// and a NaN input gives that too.
RADIX_AVX2 inline __m256 Exp(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n through the exponent field: n is in [-126, 127] after the clamp.
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

RADIX_AVX512 inline __m512 Exp(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// The lane sum of v: lanes i and i + 4 first, then i and i + 2, then the last two.
RADIX_AVX2 inline float Sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The largest (Max8) and smallest (Min8) lane of v, in Sum8's order: the halves, then lanes i
// and i + 2, then the last two.
RADIX_AVX2 inline float Max8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

RADIX_AVX2 inline float Min8(__m256 v) {
  __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_min_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_min_ss(m, _mm_movehdup_ps(m)));
}

// The first `live` lanes of v into out: all eight when live >= 8, none when live <= 0, and
// nothing past them written (the last panel of a matrix whose rows are not a multiple of 8).
[[gnu::always_inline]] RADIX_AVX2 inline void StoreFirstLanes(float* out, __m256 v, int64_t live) {
  if (live >= 8) {
    _mm256_storeu_ps(out, v);
  } else if (live > 0) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    std::memcpy(out, lanes, sizeof(float) * static_cast<size_t>(live));
  }
}

// Sum8 of eight vectors at once, with Sum8's additions (so the same bits): out[k] = Sum8(v[k]).
// 14 shuffles and 7 additions instead of 48 operations.
RADIX_AVX2 inline void Sum8x8(const __m256* v, float* out) {
  __m256 half[4];  // lanes i + 4 added: v[2m] in the low 128 bits, v[2m + 1] in the high
  for (int m = 0; m < 4; ++m) {
    half[m] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * m], v[2 * m + 1], 0x20),
                            _mm256_permute2f128_ps(v[2 * m], v[2 * m + 1], 0x31));
  }
  __m256 quarter[2];  // then lanes i + 2: per 128 bits [a0 + a2, a1 + a3, b0 + b2, b1 + b3]
  for (int m = 0; m < 2; ++m) {
    quarter[m] = _mm256_add_ps(_mm256_shuffle_ps(half[2 * m], half[2 * m + 1], 0x44),
                               _mm256_shuffle_ps(half[2 * m], half[2 * m + 1], 0xEE));
  }
  // then the last two: low 128 bits hold v0, v2, v4, v6, high v1, v3, v5, v7
  const __m256 sums = _mm256_add_ps(_mm256_shuffle_ps(quarter[0], quarter[1], 0x88),
                                    _mm256_shuffle_ps(quarter[0], quarter[1], 0xDD));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sums);
  for (int k = 0; k < 4; ++k) {
    out[2 * k] = lanes[k];
    out[2 * k + 1] = lanes[4 + k];
  }
}

// Lane sums of four vectors, {sum a, sum b, sum c, sum d}. Every vector goes through the same
// addition tree whatever its companions, so a result never depends on the tile shape.
RADIX_AVX512 inline __m128 Reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  const __m512d abd = _mm512_castps_pd(ab), cdd = _mm512_castps_pd(cd);
  const __m512 abcd = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(abd, cdd)),
                                    _mm512_castpd_ps(_mm512_unpackhi_pd(abd, cdd)));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(abcd), _mm512_extractf32x8_ps(abcd, 1));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

}  // namespace radixserve::kernels::x86

// AVX2 variant of the quantized MatMul for CPUs without VNNI: panels of 8 weight rows, one dword
// lane per row; vpmaddubsw + vpmaddwd stand in for vpdpbusd. Q8_0 codes stay signed and use the
// sign trick (|w| times sign(w) * q), because unsigned codes up to 255 would saturate vpmaddubsw.
// Every format runs compact panels near its block size (quant_kernels.h), packed with the scalar
// packer once at load (Pack) or per call (Run).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "common/check.h"
#include "kernels/half.h"
#include "kernels/mxfp4.h"
#include "kernels/x86/quant_kernels.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels::x86 {
namespace {

constexpr int64_t kRows = 8;
// Tokens per tile. 8 (tried with the 16-bit sums below) spills and measured 0.7-1.0x of 4 from
// 32 tokens on; it only helped at 1-4 tokens, which are bandwidth-bound anyway.
constexpr int kMaxTokens = 4;
// Tokens per block of a packed matmul: each thread runs its panels over one block of tokens at a
// time, so the block's activations (up to kTokenBlockBytes; at least 32 tokens, as splitting 32
// tokens into blocks of 8 or 16 measured 3-15 % slower) stay in L2 while the panels pass, instead
// of every panel reading all n tokens' from L3. Zen 3, quant_kernels_bench at 2048 tokens, two
// threads, ms per matmul (8192 x 2048 / 2048 x 8192), one block against none in the same minute:
// Q4_K 213 / 206 against 221 / 248, Q6_K 300 / 299 against 373 / 435 (256 and 512 KB blocks
// measured alike).
constexpr int64_t kTokenBlockBytes = 128 * 1024;
int64_t TokenBlock(int64_t cols) {
  return std::clamp<int64_t>(kTokenBlockBytes / cols / kMaxTokens * kMaxTokens, 32, 256);
}

// Whether the token tile at t0 is the first of its block (TokenBlock), the one that streams the
// panel from memory; later tiles of the block find it in cache.
inline bool StreamsPanel(int64_t t0, int64_t cols) { return t0 % TokenBlock(cols) == 0; }

// How far ahead of the sub-block being read the kernels prefetch their panel (measured on Zen 3:
// 2-16 KB all beat no prefetch by 1.6-1.9x on a 1B Q4_K_M decode; 8 KB was best).
constexpr int64_t kPrefetchBytes = 8192;

int32_t Load32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Prefetches the `bytes` of panel that lie kPrefetchBytes past `p`. The panel is one sequential
// stream; prefetching a few KB ahead keeps more of it in flight than the hardware prefetcher does
// on its own. Only the first token tile of a block (StreamsPanel) streams a panel from memory;
// later ones find it in cache and skip this.
// Into L2 (FetchL2): on the Xeon with AMX running this table (RADIX_KERNELS=avx2), 1B Q4_K_M
// decode 21.2-21.7 tok/s with prefetcht0 against 29.6-30.2.
[[gnu::always_inline]] RADIX_AVX2 inline void PrefetchAhead(const uint8_t* p, int64_t bytes) {
  for (int64_t line = 0; line < bytes; line += 64) FetchL2(p + kPrefetchBytes + line);
}

// Share `part` of `parts` of PrefetchAhead(p, bytes)'s lines: a loop over a super-block's
// sub-blocks fetches its next lines a share per sub-block instead of in one burst, which filled
// the miss buffers and stalled the core (perf: 53 % of the one-token Q4_K tile's samples behind
// the burst on the Xeon with AMX running this table).
[[gnu::always_inline]] RADIX_AVX2 inline void PrefetchAheadShare(const uint8_t* p, int64_t bytes,
                                                                 int part, int parts) {
  const int64_t lines = (bytes + 63) / 64;
  for (int64_t line = lines * part / parts; line < lines * (part + 1) / parts; ++line) {
    FetchL2(p + kPrefetchBytes + 64 * line);
  }
}

// Pairs of code x activation byte products summed into 16-bit lanes (vpmaddubsw). Signed codes
// (Q8_0) use |w| times sign(w) * x, since vpmaddubsw takes its first operand unsigned.
template <bool kSigned>
RADIX_AVX2 inline __m256i PairProducts(__m256i w, __m256i x) {
  return kSigned ? _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w))
                 : _mm256_maddubs_epi16(w, x);
}

// The T accumulators' first `valid` rows into y[t0 + t][...].
template <int T>
RADIX_AVX2 inline void StoreRows(const __m256 (&acc)[T], float* y, int64_t t0, int64_t ldy,
                                 int valid) {
  for (int t = 0; t < T; ++t) StoreFirstLanes(y + (t0 + t) * ldy, acc[t], valid);
}

using TileFn = void (*)(const uint8_t*, const ref::QuantizedActivations&, int64_t, float*, int64_t,
                        int);

// Code register k (elements 4k..4k+3 of each row, as unsigned codes; Q8_0: signed) of one
// sub-block of a compact panel, `regs` pointing at that sub-block's registers.
template <WeightFormat kFormat>
RADIX_AVX2 inline __m256i CompactCode(const uint8_t* regs, int k) {
  constexpr int64_t kLanes = 4 * kRows;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  if constexpr (kFormat == WeightFormat::kQ8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(regs + k * kLanes));
  } else if constexpr (kFormat == WeightFormat::kQ5_K || kFormat == WeightFormat::kQ5_0 ||
                       kFormat == WeightFormat::kQ5_1) {
    // The nibble as for Q4_K, bit 4 from the fifth register (bit k of each byte). The 16-bit
    // shifts carry bits across the byte boundary only below bit 4, which the mask drops.
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(regs + (k & 3) * kLanes));
    const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(regs + 4 * kLanes));
    const __m256i low =
        k < 4 ? _mm256_and_si256(v, low4) : _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    const __m256i high = k <= 4 ? _mm256_slli_epi16(hb, 4 - k) : _mm256_srli_epi16(hb, k - 4);
    return _mm256_or_si256(low, _mm256_and_si256(high, _mm256_set1_epi8(0x10)));
  } else if constexpr (kFormat == WeightFormat::kQ6_K) {
    const __m256i n = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(regs + (k & 1) * kLanes));
    const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(regs + 2 * kLanes));
    const __m256i low =
        k < 2 ? _mm256_and_si256(n, low4) : _mm256_and_si256(_mm256_srli_epi16(n, 4), low4);
    const __m256i high = k == 0   ? _mm256_slli_epi16(hb, 4)
                         : k == 1 ? _mm256_slli_epi16(hb, 2)
                         : k == 2 ? hb
                                  : _mm256_srli_epi16(hb, 2);
    return _mm256_or_si256(low, _mm256_and_si256(high, _mm256_set1_epi8(0x30)));
  } else {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(regs + (k & 3) * kLanes));
    const __m256i nibble =
        k < 4 ? _mm256_and_si256(v, low4) : _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    if constexpr (kFormat == WeightFormat::kMXFP4) {
      // E2M1 nibble -> unsigned code, the codes DecodeBlockCodes gives.
      const __m256i lut = _mm256_broadcastsi128_si256(
          _mm_load_si128(reinterpret_cast<const __m128i*>(kMxfp4Codes.data())));
      return _mm256_shuffle_epi8(lut, nibble);
    }
    return nibble;
  }
}

// The 16-bit sums of T tokens' pair products with code registers k0 .. k0 + kGroup - 1 of a
// compact block or sub-block (`regs`); x0: the first token's activations of it, tokens `cols`
// apart.
template <WeightFormat kFormat, int kGroup, int T>
[[gnu::always_inline]] RADIX_AVX2 inline void GroupSums(const uint8_t* regs, int k0,
                                                        const int8_t* x0, int64_t cols,
                                                        __m256i (&sum16)[T]) {
  for (int t = 0; t < T; ++t) sum16[t] = _mm256_setzero_si256();
  for (int g = 0; g < kGroup; ++g) {
    const __m256i w = CompactCode<kFormat>(regs, k0 + g);
    for (int t = 0; t < T; ++t) {
      const __m256i x = _mm256_set1_epi32(Load32(x0 + t * cols + 4 * (k0 + g)));
      sum16[t] = _mm256_add_epi16(sum16[t], PairProducts<kFormat == WeightFormat::kQ8_0>(w, x));
      // Keeps the sum in its register here: without it GCC reassociates the integer sums,
      // computes all kGroup x T products first and spills them to the stack (AVX2 has 16
      // registers; Zen 5 with the avx2 table, 32 tokens of Q4_K: 170-177 -> 247-263 G
      // multiply-adds/s).
      if constexpr (kGroup > 1) __asm__("" : "+x"(sum16[t]));
    }
  }
}

// One token tile over a compact panel (quant_kernels.h): each code register of a block is
// unpacked once and serves every token. The integer sums are exact and D and M are the blocks'
// own half-precision scales widened exactly, so every grouping of the sums gives the same bits.
// For the formats of one scale per 32-element block (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4); the
// K-quants run CompactSuperTile.
template <WeightFormat kFormat, int T>
RADIX_AVX2 void CompactTile(const uint8_t* panel, const ref::QuantizedActivations& a, int64_t t0,
                            float* y, int64_t ldy, int valid) {
  constexpr bool kQ8 = kFormat == WeightFormat::kQ8_0;
  constexpr bool kMx = kFormat == WeightFormat::kMXFP4;  // a legacy layout with float scales
  constexpr bool kQ5 = kFormat == WeightFormat::kQ5_0 || kFormat == WeightFormat::kQ5_1;
  static_assert(kFormat == WeightFormat::kQ4_0 || kFormat == WeightFormat::kQ4_1 || kQ5 || kQ8 ||
                kMx);
  constexpr bool kMin = kFormat == WeightFormat::kQ4_1 || kFormat == WeightFormat::kQ5_1;
  constexpr int kW = 8;  // code registers per block
  // Code registers whose 16-bit products may be summed before widening: codes below 16 (Q4), 25
  // (MXFP4) or 32 (Q5) times activations of at most 127 in magnitude, two per 16-bit lane (Q5:
  // 4 x 2 x 31 x 127 = 31,496 < 32,768); Q8_0's products can fill a lane on their own.
  constexpr int kGroup = kQ8 ? 1 : (kMx || kQ5) ? 4 : 8;
  constexpr int64_t kLanes = 4 * kRows;
  const int64_t subs = a.subs, block_bytes = CompactLayoutBlockBytes(kFormat, kRows);
  const int8_t* q = a.q.data() + t0 * a.cols;
  const float* d = a.d.data() + t0 * subs;
  const float* s = a.s.data() + t0 * subs;
  const int32_t* bias = a.bias.data() + t0 * subs;
  const bool streams = StreamsPanel(t0, a.cols);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t j = 0; j < subs; ++j) {
    const uint8_t* p = panel + j * block_bytes;
    if (streams) PrefetchAhead(p, block_bytes);
    const uint8_t* scales = p + (kQ8 ? 8 : kQ5 ? 5 : 4) * kLanes;
    __m256 scale, min = _mm256_setzero_ps();
    if constexpr (kMx) {
      scale = _mm256_loadu_ps(reinterpret_cast<const float*>(scales));
    } else {
      // The blocks' own half-precision d and m: the conversion is exact.
      scale = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
      if constexpr (kMin) {
        min = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 16)));
      }
    }
    // Codes outer, tokens inner: one code register and T integer sums live at a time. The
    // 16-bit pair sums of kGroup code registers are added as 16-bit lanes before one vpmaddwd
    // widens them (exact: kGroup * 2 * max code * 127 stays below 32768), instead of one
    // vpmaddwd per register.
    __m256i dot[T];
    for (int t = 0; t < T; ++t) dot[t] = _mm256_set1_epi32(bias[t * subs + j]);
    for (int k0 = 0; k0 < kW; k0 += kGroup) {
      __m256i sum16[T];
      GroupSums<kFormat, kGroup>(p, k0, q + j * 4 * kW, a.cols, sum16);
      for (int t = 0; t < T; ++t) {
        dot[t] = _mm256_add_epi32(dot[t], _mm256_madd_epi16(sum16[t], ones));
        // The same for the 32-bit sums where a group is one register (Q8_0: 8 x 4 products
        // spilled the same way; 155-161 -> 173-182 G multiply-adds/s on the same proxy).
        if constexpr (kGroup == 1) __asm__("" : "+x"(dot[t]));
      }
    }
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[t]),
                               _mm256_mul_ps(scale, _mm256_set1_ps(d[t * subs + j])), acc[t]);
      if constexpr (kMin) acc[t] = _mm256_fmadd_ps(min, _mm256_set1_ps(s[t * subs + j]), acc[t]);
    }
  }
  StoreRows(acc, y, t0, ldy, valid);
}

// The K-quants over a compact panel in integers per super-block, as the avx512_vnni tiles do
// (quant_kernels.h, SumsSuperBlocks): the 16-bit pair sums of a sub-block are widened by a
// vpmaddwd against the rows' scales (in both halves of each row's lane) instead of against ones,
// so isum = sum_j sc_j * dot_j costs what the widening did. Q4_K and Q5_K add imin = sum_j m_j *
// sum_j(q), a vpmaddwd of the rows' pairs of mins by the token's pairs of sub-block sums; Q6_K's
// offset term -32 * sc_j * sum_j(q) is one vpmaddwd per sub-block. Then one float step per
// super-block, in the AVX-512 tiles' order (their AddSuperBlock), so the results are theirs bit
// for bit.
template <WeightFormat kFormat, int T>
RADIX_AVX2 void CompactSuperTile(const uint8_t* panel, const ref::QuantizedActivations& a,
                                 int64_t t0, float* y, int64_t ldy, int valid) {
  constexpr bool kQ5K = kFormat == WeightFormat::kQ5_K, kQ6K = kFormat == WeightFormat::kQ6_K;
  static_assert(kFormat == WeightFormat::kQ4_K || kQ5K || kQ6K);
  constexpr int kSubs = kQ6K ? 16 : 8, kW = kQ6K ? 4 : 8;
  // Code registers per sub-block: the nibbles, then Q5_K's and Q6_K's high bits.
  constexpr int kRegs = kQ6K ? 3 : kQ5K ? 5 : 4;
  // Codes below 16 (Q4_K), 32 (Q5_K) or 64 (Q6_K) times activations of at most 127: see
  // CompactTile.
  constexpr int kGroup = kQ6K ? 2 : kQ5K ? 4 : 8;
  constexpr int64_t kLanes = 4 * kRows;
  const int64_t subs = a.subs, block_bytes = CompactLayoutBlockBytes(kFormat, kRows);
  const int8_t* q = a.q.data() + t0 * a.cols;
  const float* d = a.d.data() + t0 * subs;
  const int16_t* sums = a.sums.data() + t0 * subs;
  const bool streams = StreamsPanel(t0, a.cols);
  const __m256i low16 = _mm256_set1_epi32(0xFFFF);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < subs / kSubs; ++b) {
    const uint8_t* p = panel + b * block_bytes;
    // sc[kSubs][rows] (Q6_K: int8), then for Q4_K and Q5_K m[8][rows]; then the floats.
    const uint8_t* scales = p + kRegs * kSubs * kLanes;
    const auto* floats = reinterpret_cast<const float*>(scales + 16 * kRows);
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int js = 0; js < kSubs; ++js) {
      if (streams) PrefetchAheadShare(p, block_bytes, js, kSubs);
      const __m128i sc8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + js * kRows));
      const __m256i sc = kQ6K ? _mm256_cvtepi8_epi32(sc8) : _mm256_cvtepu8_epi32(sc8);
      const __m256i sc2 = _mm256_or_si256(_mm256_and_si256(sc, low16), _mm256_slli_epi32(sc, 16));
      const uint8_t* sub_regs = p + js * kRegs * kLanes;
      const int8_t* x0 = q + (b * kSubs + js) * 4 * kW;
      for (int k0 = 0; k0 < kW; k0 += kGroup) {
        __m256i sum16[T];
        GroupSums<kFormat, kGroup>(sub_regs, k0, x0, a.cols, sum16);
        for (int t = 0; t < T; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(sum16[t], sc2));
        }
      }
    }
    const __m256 dv = _mm256_loadu_ps(floats);
    if constexpr (kQ6K) {
      // The codes' offset, -32 * sum_j sc_j * sum_j(q), two sub-blocks per vpmaddwd: each row's
      // lane holds -32 * sc of sub-blocks 2i and 2i + 1 (|.| <= 4096), times the token's pair of
      // sub-block sums (|.| <= 2032).
      for (int i = 0; i < kSubs / 2; ++i) {
        const __m256i s0 = _mm256_cvtepi8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 2 * i * kRows)));
        const __m256i s1 = _mm256_cvtepi8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + (2 * i + 1) * kRows)));
        const __m256i offsets =
            _mm256_sub_epi16(_mm256_setzero_si256(),
                             _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi32(s0, 5), low16),
                                             _mm256_slli_epi32(s1, 21)));
        for (int t = 0; t < T; ++t) {
          int32_t pair;
          std::memcpy(&pair, sums + t * subs + b * kSubs + 2 * i, sizeof(pair));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(offsets, _mm256_set1_epi32(pair)));
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m256 da = _mm256_set1_ps(d[t * subs + b * kSubs]);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dv, da), acc[t]);
      }
      continue;
    }
    __m256i mins[kSubs / 2];  // lane r: m_2i, m_2i+1 of row r as int16
    for (int i = 0; i < kSubs / 2; ++i) {
      const __m256i m0 = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + (8 + 2 * i) * kRows)));
      const __m256i m1 = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + (9 + 2 * i) * kRows)));
      mins[i] = _mm256_or_si256(m0, _mm256_slli_epi32(m1, 16));
    }
    const __m256 neg_dmin = _mm256_sub_ps(_mm256_setzero_ps(), _mm256_loadu_ps(floats + kRows));
    for (int t = 0; t < T; ++t) {
      const int16_t* ts = sums + t * subs + b * kSubs;
      __m256i imin = _mm256_setzero_si256();
      for (int i = 0; i < kSubs / 2; ++i) {
        int32_t pair;
        std::memcpy(&pair, ts + 2 * i, sizeof(pair));
        imin = _mm256_add_epi32(imin, _mm256_madd_epi16(mins[i], _mm256_set1_epi32(pair)));
      }
      const __m256 da = _mm256_set1_ps(d[t * subs + b * kSubs]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dv, da), acc[t]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), _mm256_mul_ps(neg_dmin, da), acc[t]);
    }
  }
  StoreRows(acc, y, t0, ldy, valid);
}

// The compact-panel tile of kFormat: the K-quants' super-block sums or the per-block one.
template <WeightFormat kFormat, int T>
RADIX_AVX2 void AnyCompactTile(const uint8_t* panel, const ref::QuantizedActivations& a, int64_t t0,
                               float* y, int64_t ldy, int valid) {
  if constexpr (kFormat == WeightFormat::kQ4_K || kFormat == WeightFormat::kQ5_K ||
                kFormat == WeightFormat::kQ6_K) {
    CompactSuperTile<kFormat, T>(panel, a, t0, y, ldy, valid);
  } else {
    CompactTile<kFormat, T>(panel, a, t0, y, ldy, valid);
  }
}

template <WeightFormat kFormat>
TileFn PickCompactTile(int tokens) {
  switch (tokens) {
    case 1:
      return AnyCompactTile<kFormat, 1>;
    case 2:
      return AnyCompactTile<kFormat, 2>;
    case 3:
      return AnyCompactTile<kFormat, 3>;
    default:
      return AnyCompactTile<kFormat, 4>;
  }
}

// The compact-panel tile of `format` (every block-quantized format has one).
TileFn CompactTileFor(WeightFormat format, int tokens) {
  switch (format) {
    case WeightFormat::kQ4_0:
      return PickCompactTile<WeightFormat::kQ4_0>(tokens);
    case WeightFormat::kQ4_1:
      return PickCompactTile<WeightFormat::kQ4_1>(tokens);
    case WeightFormat::kQ5_0:
      return PickCompactTile<WeightFormat::kQ5_0>(tokens);
    case WeightFormat::kQ5_1:
      return PickCompactTile<WeightFormat::kQ5_1>(tokens);
    case WeightFormat::kQ8_0:
      return PickCompactTile<WeightFormat::kQ8_0>(tokens);
    case WeightFormat::kQ4_K:
      return PickCompactTile<WeightFormat::kQ4_K>(tokens);
    case WeightFormat::kQ5_K:
      return PickCompactTile<WeightFormat::kQ5_K>(tokens);
    case WeightFormat::kQ6_K:
      return PickCompactTile<WeightFormat::kQ6_K>(tokens);
    case WeightFormat::kMXFP4:
      return PickCompactTile<WeightFormat::kMXFP4>(tokens);
    default:
      RADIX_CHECK_MSG(false, "not a block-quantized format");
      return nullptr;
  }
}

// Load-time packing: every format into its compact panels (quant_kernels.h), made once, so a
// decode step only streams them.
int64_t PackedPanelBytes(const WeightMatrix& w) {
  return (w.cols / BlockElements(w.format)) * CompactLayoutBlockBytes(w.format, kRows);
}

int64_t PackedBytes(const WeightMatrix& w) {
  return (w.rows + kRows - 1) / kRows * PackedPanelBytes(w);
}

void PackPanel(const WeightMatrix& w, int64_t p, uint8_t* out) {
  PackCompactLayoutPanel(w, p * kRows, kRows, out);
}

void Pack(const WeightMatrix& w, int64_t panel_begin, int64_t panel_end, uint8_t* out) {
  const int64_t panel_bytes = PackedPanelBytes(w);
  for (int64_t p = panel_begin; p < panel_end; ++p) PackPanel(w, p, out + p * panel_bytes);
}

// Panel p (packed by PackPanel) times every token. Compact panels are decoded by every token
// tile here (QuantTiles chooses for the avx512_vnni variant only).
void RunPanel(const WeightMatrix& w, const uint8_t* panel, const ref::QuantizedActivations& a,
              int64_t p, TokenRange range, float* y) {
  const int64_t row0 = p * kRows;
  const int valid = static_cast<int>(std::min(kRows, w.rows - row0));
  for (int64_t t0 = range.begin; t0 < range.end; t0 += kMaxTokens) {
    const int tokens = static_cast<int>(std::min<int64_t>(kMaxTokens, range.end - t0));
    CompactTileFor(w.format, tokens)(panel, a, t0, y + row0, w.rows, valid);
  }
}

void RunPacked(const WeightMatrix& w, const uint8_t* packed, const ref::QuantizedActivations& a,
               int64_t panel_begin, int64_t panel_end, float* y, QuantTiles /*tiles*/) {
  const int64_t panel_bytes = PackedPanelBytes(w);
  const int64_t block = TokenBlock(a.cols);
  for (int64_t t0 = 0; t0 < a.n; t0 += block) {
    const TokenRange tokens{t0, std::min(a.n, t0 + block)};
    for (int64_t p = panel_begin; p < panel_end; ++p) {
      RunPanel(w, packed + p * panel_bytes, a, p, tokens, y);
    }
  }
}

// Weights not packed at load: each panel is packed per call as Pack packs it and multiplied as
// RunPacked multiplies it, so packed and unpacked weights give the same bits.
void Run(const WeightMatrix& w, const ref::QuantizedActivations& a, int64_t panel_begin,
         int64_t panel_end, float* y) {
  thread_local std::vector<uint8_t> panel;
  const auto panel_bytes = static_cast<size_t>(PackedPanelBytes(w));
  if (panel.size() < panel_bytes) panel.resize(panel_bytes);
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    PackPanel(w, p, panel.data());
    RunPanel(w, panel.data(), a, p, {0, a.n}, y);
  }
}

}  // namespace

const QuantVariant* Avx2QuantVariant() {
  static const QuantVariant variant{"avx2",      kRows, true,     Run, QuantizeActivationRowsAvx2,
                                    PackedBytes, Pack,  RunPacked};
  return CpuHasAvx2() ? &variant : nullptr;
}

}  // namespace radixserve::kernels::x86

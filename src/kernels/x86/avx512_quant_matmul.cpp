// AVX-512 VNNI variant of the quantized MatMul: panels of 16 weight rows, one dword lane per row,
// so a single vpdpbusd multiplies four codes of 16 rows with four broadcast activation bytes and
// no horizontal sums are needed. Up to 8 tokens accumulate in registers per pass over a panel.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "common/check.h"
#include "kernels/quant_matmul.h"
#include "kernels/x86/quant_kernels.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels::x86 {
namespace {

constexpr int64_t kRows = 16;
constexpr int64_t kMaxTokens = 8;
// Tokens a packed matmul runs over all its panels before the next ones: their quantized
// activations (up to 1 MB: 256 tokens of 4096 columns) stay in L2 while the panels stream past,
// instead of every panel reading all n tokens' from L3 or memory (Zen 5, 8192 x 2048 Q4_K at 2048
// tokens, in cache: 475 -> 509 G multiply-adds/s with code panels, 494 -> 532 with compact ones;
// the Xeon with AMX, 2048 x 8192 at 512 tokens, 128 rather than 256 tokens a block: Q4_K 442-559
// -> 625-628, Q6_K 467-495 -> 589-627).
constexpr int64_t kTokenBlockBytes = int64_t{1} << 20;
int64_t TokenBlock(int64_t cols) {
  return std::clamp<int64_t>(kTokenBlockBytes / cols / 16 * 16, 64, 256);
}
// How far ahead of the block being read the packed-panel loader prefetches. 1B Q4_K_M
// single-stream decode, alternating runs: on Zen 5, 8 KB 65-91 tok/s against 57-72 at 2 KB; on a
// Xeon with AMX and slow memory, 16 KB 26.4-28.4 against 22.1-23.0 at 8 KB (32 KB 25.5-26.8,
// 4 KB 23.0-23.3). Q8_0 the same at both distances on both.
constexpr int64_t kPrefetchBytes = 16384;
// The same for the per-call packer, in blocks ahead within each row.
constexpr int64_t kPrefetchBlocks = 6;
// The panel loaders fetch kPrefetchBytes ahead into L2 (FetchL2), not L1. Xeon with AMX, 1B
// Q4_K_M single-stream decode, one binary alternating: 30.1-31.7 tok/s with T0, 33.5-37.6 with
// T1 at 8-24 KB (16 KB: 34.1-36.3), 25.5 with no fetch, 17 with NTA.
// Each line is also fetched from L2 into L1 (FetchL1) kL1PrefetchBytes ahead, once the far fetch
// has had time to bring it. Zen 4, a throwaway build alternating 0 and 2 KB (session 60): the
// one-token tile on a 302 MB matrix, best GB/s of five rounds, Q6_K 51-59 against 42-44, Q4_K
// 34-53 against 33-43; 1B Q4_K_M served decode, best of each start, higher in 6 of 8 rounds
// (mean 46.0 against 40.3 tok/s), prefill unchanged.
constexpr int64_t kL1PrefetchBytes = 2048;
// The panel loaders' fetches for the line at `line`, both distances.
[[gnu::always_inline]] inline void FetchPanelLine(const uint8_t* line) {
  FetchL2(line + kPrefetchBytes);
  FetchL1(line + kL1PrefetchBytes);
}

// Dword lane r of the result holds row r's value at row_offsets[r] + offset (bytes).
RADIX_AVX512_VNNI __m512i GatherRows(const uint8_t* base, __m512i row_offsets, int64_t offset) {
  return _mm512_i32gather_epi32(row_offsets, base + offset, 1);
}

// 16 bytes from each of 16 rows; result k holds dword k of every row (lane r = row r).
RADIX_AVX512_VNNI void Transpose16x4(const uint8_t* const* rows, int64_t offset, __m512i* out) {
  __m512i z[4];
  for (int g = 0; g < 4; ++g) {
    // Lane L of z[g] holds row 4L + g, so after the 4x4 transposes lane 4L + g is row 4L + g.
    __m512i v =
        _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[g] + offset)));
    for (int lane = 1; lane < 4; ++lane) {
      const auto* src = reinterpret_cast<const __m128i*>(rows[4 * lane + g] + offset);
      switch (lane) {
        case 1:
          v = _mm512_inserti32x4(v, _mm_loadu_si128(src), 1);
          break;
        case 2:
          v = _mm512_inserti32x4(v, _mm_loadu_si128(src), 2);
          break;
        default:
          v = _mm512_inserti32x4(v, _mm_loadu_si128(src), 3);
          break;
      }
    }
    z[g] = v;
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Compact panels keep a block format's own size: for each block, the codes of 16 rows as
// transposed dword lanes (Q4_0/Q4_1: 4 registers of nibble pairs, low nibble = elements 4k..4k+3,
// high nibble = elements 16+4k..; Q8_0: 8 registers of bytes already shifted by 128), then 16
// float16 scales, then (Q4_1, Q5_1) 16 float16 offsets m. 16 * BlockBytes bytes per block. Q5_0
// and Q5_1 put a register of fifth bits between nibbles and scales: bit k of byte 4r + e is the
// fifth bit of row r's element 4k + e, bit 4 + k that of element 16 + 4k + e.
bool HasCompactPanels(WeightFormat format) {
  return format == WeightFormat::kQ4_0 || format == WeightFormat::kQ4_1 ||
         format == WeightFormat::kQ5_0 || format == WeightFormat::kQ5_1 ||
         format == WeightFormat::kQ8_0;
}

constexpr bool HasFifthBits(WeightFormat format) {
  return format == WeightFormat::kQ5_0 || format == WeightFormat::kQ5_1;
}

constexpr bool HasMin(WeightFormat format) {
  return format == WeightFormat::kQ4_1 || format == WeightFormat::kQ5_1;
}

// Formats the per-call path packs into compact panels (the fifth bits are rearranged with
// scalar code, which only pays off once, at load time).
bool PerCallCompact(WeightFormat format) {
  return HasCompactPanels(format) && !HasFifthBits(format);
}

constexpr int64_t CompactCodeBytes(WeightFormat format) {
  return format == WeightFormat::kQ8_0 ? 512 : HasFifthBits(format) ? 320 : 256;
}

// high_offset: where a block's 32 fifth bits start (after d, and m for Q5_1).
void PackFifthBits(const uint8_t* const* rows, int64_t block_offset, int64_t high_offset,
                   uint8_t* out) {
  for (int r = 0; r < 16; ++r) {
    uint32_t high;
    std::memcpy(&high, rows[r] + block_offset + high_offset, sizeof(high));
    for (int e = 0; e < 4; ++e) {
      uint32_t byte = 0;
      for (int k = 0; k < 4; ++k) {
        byte |= ((high >> (4 * k + e)) & 1u) << k;
        byte |= ((high >> (16 + 4 * k + e)) & 1u) << (4 + k);
      }
      out[4 * r + e] = static_cast<uint8_t>(byte);
    }
  }
}

// Packs `blocks` blocks of 16 rows (rows[r] = start of row r) into compact panel form.
RADIX_AVX512_VNNI void PackCompact(WeightFormat format, const uint8_t* const* rows,
                                   __m512i row_offsets, int64_t blocks, uint8_t* out) {
  const int64_t block_bytes = BlockBytes(format);
  const int64_t code_bytes = CompactCodeBytes(format);
  // Bytes before a block's codes: d, then m (Q4_1, Q5_1), then the fifth bits (Q5_0, Q5_1).
  const int64_t scale_bytes = HasMin(format) ? 4 : 2;
  const int64_t header_bytes = scale_bytes + (HasFifthBits(format) ? 4 : 0);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* dst = out + b * 16 * block_bytes;
    // Sixteen row streams at once are more than the hardware prefetcher follows well.
    for (int r = 0; r < 16; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + (b + kPrefetchBlocks) * block_bytes),
                   _MM_HINT_T0);
    }
    __m512i g[4];
    for (int64_t half = 0; half < code_bytes / 256; ++half) {
      Transpose16x4(rows, b * block_bytes + header_bytes + 16 * half, g);
      for (int k = 0; k < 4; ++k) {
        const __m512i v = format == WeightFormat::kQ8_0 ? _mm512_xor_si512(g[k], flip) : g[k];
        _mm512_storeu_si512(dst + 256 * half + 64 * k, v);
      }
    }
    if (HasFifthBits(format)) PackFifthBits(rows, b * block_bytes, scale_bytes, dst + 256);
    const __m512i header = GatherRows(rows[0], row_offsets, b * block_bytes);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + code_bytes),
                        _mm512_cvtepi32_epi16(header));
    if (HasMin(format)) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + code_bytes + 32),
                          _mm512_cvtepi32_epi16(_mm512_srli_epi32(header, 16)));
    }
  }
}

// Panel loaders: one sub-block's code registers, scales and offsets.
// `panel` reading the next panel of `ahead` into L2 as it goes, a whole-cache-line share per
// each of its `subs` sub-blocks (unchanged when there is nothing to fetch).
template <class Panel>
Panel FetchingAhead(Panel panel, const Lookahead& ahead, int64_t subs) {
  if (ahead.next != nullptr && subs > 0) {
    panel.next = ahead.next;
    panel.next_chunk = ahead.Chunk(subs);
  }
  return panel;
}

struct CodePanel {  // unpacked bytes (see quant_kernels.h)
  const uint8_t* panel;
  int64_t stride;
  bool prefetch;  // the panel streams from memory (read once, by a single token tile)
  const uint8_t* next = nullptr;  // Lookahead::next, next_chunk bytes of it per sub-block
  int64_t next_chunk = 0;
  template <int KW>
  // Inlined into the tiles: a call would spill the code registers to the stack.
  [[gnu::always_inline]] RADIX_AVX512_VNNI inline void Load(int64_t j, __m512i* w, __m512* scale,
                                                            __m512* min) const {
    const uint8_t* p = panel + j * stride;
    for (int64_t line = 0; prefetch && line < stride; line += 64) {
      FetchPanelLine(p + line);
    }
    PrefetchNext(next, next_chunk, j);
    for (int k = 0; k < KW; ++k) w[k] = _mm512_loadu_si512(p + 64 * k);
    *scale = _mm512_loadu_ps(p + 64 * KW);
    *min = _mm512_loadu_ps(p + 64 * KW + 64);
  }
};

// Bit k of each byte of h to bit 4 of code register k (Q5_0 / Q5_1: bit 4 + k to register 4 + k
// too, which the same shifts do); the 16-bit shifts move bits across bytes only where the & 0x10
// drops them.
RADIX_AVX512_VNNI inline void OrFifthBits(__m512i h, __m512i* w) {
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  w[0] = _mm512_or_si512(w[0], _mm512_and_si512(_mm512_slli_epi16(h, 4), bit4));
  w[1] = _mm512_or_si512(w[1], _mm512_and_si512(_mm512_slli_epi16(h, 3), bit4));
  w[2] = _mm512_or_si512(w[2], _mm512_and_si512(_mm512_slli_epi16(h, 2), bit4));
  w[3] = _mm512_or_si512(w[3], _mm512_and_si512(_mm512_slli_epi16(h, 1), bit4));
  w[4] = _mm512_or_si512(w[4], _mm512_and_si512(h, bit4));
  w[5] = _mm512_or_si512(w[5], _mm512_and_si512(_mm512_srli_epi16(h, 1), bit4));
  w[6] = _mm512_or_si512(w[6], _mm512_and_si512(_mm512_srli_epi16(h, 2), bit4));
  w[7] = _mm512_or_si512(w[7], _mm512_and_si512(_mm512_srli_epi16(h, 3), bit4));
}

template <WeightFormat kFormat>
struct CompactPanel {
  const uint8_t* panel;
  const uint8_t* next = nullptr;  // Lookahead::next, next_chunk bytes of it per sub-block
  int64_t next_chunk = 0;
  // kFetch: fetch ahead in the panel's stream (the VNNI tiles; the AMX groups' chunks, read a few
  // blocks at a time, run faster without it).
  template <int KW, bool kFetch = true>
  // Inlined into the tiles: a call would spill the code registers to the stack.
  [[gnu::always_inline]] RADIX_AVX512_VNNI inline void Load(int64_t j, __m512i* w, __m512* scale,
                                                            __m512* min) const {
    constexpr int64_t kCodeBytes = CompactCodeBytes(kFormat);
    constexpr bool kMx = kFormat == WeightFormat::kMXFP4;  // quant_kernels.h's MXFP4 layout
    constexpr int64_t kBlockBytes = CompactLayoutBlockBytes(kFormat, kRows);
    const uint8_t* p = panel + j * kBlockBytes;
    // Panels are one sequential stream; fetching a few blocks ahead keeps DRAM busy at decode.
    for (int64_t line = 0; kFetch && line < kBlockBytes; line += 64) {
      FetchPanelLine(p + line);
    }
    if constexpr (kFetch) PrefetchNext(next, next_chunk, j);
    if constexpr (kFormat == WeightFormat::kQ8_0) {
      for (int k = 0; k < 8; ++k) w[k] = _mm512_loadu_si512(p + 64 * k);
    } else {
      const __m512i low = _mm512_set1_epi8(0x0F);
      for (int k = 0; k < 4; ++k) {
        const __m512i g = _mm512_loadu_si512(p + 64 * k);
        w[k] = _mm512_and_si512(g, low);
        w[k + 4] = _mm512_and_si512(_mm512_srli_epi16(g, 4), low);
      }
      if constexpr (HasFifthBits(kFormat)) OrFifthBits(_mm512_loadu_si512(p + 256), w);
      if constexpr (kMx) {
        // E2M1 nibble -> unsigned code (the doubled value + 12), the codes DecodeBlockCodes gives.
        const __m512i lut = _mm512_broadcast_i32x4(
            _mm_load_si128(reinterpret_cast<const __m128i*>(kMxfp4Codes.data())));
        for (int k = 0; k < 8; ++k) w[k] = _mm512_shuffle_epi8(lut, w[k]);
      }
    }
    if constexpr (kMx) {  // float D = 2^(e - 128)
      *scale = _mm512_loadu_ps(p + kCodeBytes);
    } else {
      *scale =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kCodeBytes)));
    }
    if constexpr (HasMin(kFormat)) {
      *min = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kCodeBytes + 32)));
    } else {
      *min = _mm512_setzero_ps();
    }
  }
};

// The K-quants' compact panels read for the integer super-block sums (quant_kernels.h):
// Codes decodes sub-block js of super-block b (sub-block kSubs * b + js of the panel) into kKW
// code registers, Scales gives its scales as int32 lanes (6-bit unsigned, Q6_K's int8), Super the
// block's header: d, and for Q4_K / Q5_K -dmin and the mins as kSuperHeaderBytes's int16 pairs.
// The super-block and the sub-block come separately, from the tiles' two loops: a flat sub-block
// index cost every sub-block a signed division's shifts and fix-ups to split it again.
template <WeightFormat kFormat>
struct CompactSuperPanel {
  static constexpr bool kQ6 = kFormat == WeightFormat::kQ6_K;
  static constexpr bool kQ5 = kFormat == WeightFormat::kQ5_K;
  static constexpr int kSubs = kQ6 ? 16 : 8;  // sub-blocks per super-block
  static constexpr int kKW = kQ6 ? 4 : 8;     // code registers per sub-block
  static constexpr bool kMin = !kQ6;
  static constexpr int kRegs = kQ6 ? 3 : kQ5 ? 5 : 4;  // stored registers per sub-block
  static constexpr int64_t kBlockBytes = CompactLayoutBlockBytes(kFormat, kRows);
  static constexpr int64_t kScaleOffset = kSubs * kRegs * 64;  // sc[kSubs][16], then the rest
  // The block's bytes each sub-block prefetches, so one pass over a block fetches all of it:
  // kChunkLines lines from js * kChunk, a count known here so that the fetches are unrolled (as a
  // loop to (js + 1) * kChunk, with its counter and branches, they were a quarter of a one-token
  // tile's instructions).
  static constexpr int64_t kChunk = (kBlockBytes + kSubs - 1) / kSubs;
  static constexpr int kChunkLines = static_cast<int>((kChunk + 63) / 64);
  const uint8_t* panel;
  const uint8_t* next = nullptr;  // Lookahead::next, next_chunk bytes of it per sub-block
  int64_t next_chunk = 0;

  // Inlined into the tiles: a call would spill the code registers to the stack.
  [[gnu::always_inline]] RADIX_AVX512_VNNI inline void Codes(int64_t b, int js, __m512i* w) const {
    const uint8_t* p = panel + b * kBlockBytes;
#pragma GCC unroll 8
    for (int line = 0; line < kChunkLines; ++line) FetchPanelLine(p + js * kChunk + 64 * line);
    PrefetchNext(next, next_chunk, kSubs * b + js);
    const uint8_t* regs = p + js * kRegs * 64;
    const __m512i low = _mm512_set1_epi8(0x0F);
    if constexpr (kQ6) {
      // Register g holds the low 4 bits of elements 4g.. (low nibble) and 8 + 4g.. (high);
      // bits 2k, 2k + 1 of the third register are bits 4-5 of elements 4k...
      const __m512i n0 = LoadKept(regs), n1 = LoadKept(regs + 64), hb = LoadKept(regs + 128);
      const __m512i bits45 = _mm512_set1_epi8(0x30);
      w[0] = _mm512_or_si512(_mm512_and_si512(n0, low),
                             _mm512_and_si512(_mm512_slli_epi16(hb, 4), bits45));
      w[1] = _mm512_or_si512(_mm512_and_si512(n1, low),
                             _mm512_and_si512(_mm512_slli_epi16(hb, 2), bits45));
      w[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(n0, 4), low),
                             _mm512_and_si512(hb, bits45));
      w[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(n1, 4), low),
                             _mm512_and_si512(_mm512_srli_epi16(hb, 2), bits45));
    } else {
      for (int k = 0; k < 4; ++k) {
        const __m512i g = LoadKept(regs + 64 * k);
        w[k] = _mm512_and_si512(g, low);
        w[k + 4] = _mm512_and_si512(_mm512_srli_epi16(g, 4), low);
      }
      if constexpr (kQ5) OrFifthBits(LoadKept(regs + 256), w);
    }
  }
  [[gnu::always_inline]] RADIX_AVX512_VNNI inline __m512i Scales(int64_t b, int js) const {
    const auto* sc =
        reinterpret_cast<const __m128i*>(panel + b * kBlockBytes + kScaleOffset + js * kRows);
    return kQ6 ? _mm512_cvtepi8_epi32(_mm_loadu_si128(sc))
               : _mm512_cvtepu8_epi32(_mm_loadu_si128(sc));
  }
  [[gnu::always_inline]] RADIX_AVX512_VNNI inline void Super(int64_t b, __m512* d, __m512* neg_dmin,
                                                             __m512i* mins) const {
    const uint8_t* rest = panel + b * kBlockBytes + kScaleOffset + kSubs * kRows;
    if constexpr (kQ6) {  // float d[16]
      *d = _mm512_loadu_ps(rest);
      return;
    }
    // m[8][16] bytes, then float d[16], dmin[16].
    for (int p = 0; p < 4; ++p) {
      const __m512i even = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(rest + 2 * p * 16)));
      const __m512i odd = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(rest + (2 * p + 1) * 16)));
      mins[p] = _mm512_or_si512(even, _mm512_slli_epi32(odd, 16));
    }
    const auto* floats = reinterpret_cast<const float*>(rest + 8 * kRows);
    *d = _mm512_loadu_ps(floats);
    *neg_dmin = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_loadu_ps(floats + kRows));
  }
};

// A compact super panel expanded once for several token tiles: per super-block, for each of its
// kSubs sub-blocks its kKW code registers and its scales as int32 lanes, then the header
// (kSuperHeaderBytes).
template <int kSubs_, int kKW_, bool kMin_>
struct CodeSuperPanel {
  static constexpr int kSubs = kSubs_, kKW = kKW_;
  static constexpr bool kMin = kMin_;
  static constexpr int64_t kSubBytes = kKW * 64 + 64;
  static constexpr int64_t kSuperBytes = kSubs * kSubBytes + kSuperHeaderBytes;
  const uint8_t* panel;
  const uint8_t* next = nullptr;  // Lookahead::next, next_chunk bytes of it per sub-block
  int64_t next_chunk = 0;

  [[gnu::always_inline]] RADIX_AVX512_VNNI inline void Codes(int64_t b, int js, __m512i* w) const {
    PrefetchNext(next, next_chunk, kSubs * b + js);
    const uint8_t* p = panel + b * kSuperBytes + js * kSubBytes;
    for (int k = 0; k < kKW; ++k) w[k] = _mm512_loadu_si512(p + 64 * k);
  }
  [[gnu::always_inline]] RADIX_AVX512_VNNI inline __m512i Scales(int64_t b, int js) const {
    return _mm512_loadu_si512(panel + b * kSuperBytes + js * kSubBytes + kKW * 64);
  }
  [[gnu::always_inline]] RADIX_AVX512_VNNI inline void Super(int64_t b, __m512* d, __m512* neg_dmin,
                                                             __m512i* mins) const {
    const uint8_t* h = panel + b * kSuperBytes + kSubs * kSubBytes;
    *d = _mm512_loadu_ps(h);
    if constexpr (!kMin) return;
    *neg_dmin = _mm512_loadu_ps(h + 64);
    for (int p = 0; p < 4; ++p) mins[p] = _mm512_loadu_si512(h + 128 + 64 * p);
  }
};

// The CodeSuperPanel a compact super panel expands into.
template <class Compact>
using ExpandedSuperPanel = CodeSuperPanel<Compact::kSubs, Compact::kKW, Compact::kMin>;

// Super-block b's header of `source` (a compact or code super panel) at out (kSuperHeaderBytes).
template <class Panel>
[[gnu::always_inline]] RADIX_AVX512_VNNI inline void StoreSuperHeader(const Panel& source,
                                                                      int64_t b, uint8_t* out) {
  __m512 d, neg_dmin = _mm512_setzero_ps();
  __m512i mins[4] = {};
  source.Super(b, &d, &neg_dmin, mins);
  _mm512_storeu_ps(out, d);
  _mm512_storeu_ps(out + 64, neg_dmin);
  for (int p = 0; p < 4; ++p) _mm512_storeu_si512(out + 128 + 64 * p, mins[p]);
}

int32_t Load32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The tiles take their tokens kChains at a time through DotChains. One token's KW vpdpbusd form
// a chain, each waiting on the last (latency 4-5 cycles, one or two issued per cycle): a token at
// a time left Zen 4 idle between them (perf annotate, session 53). Four chains side by side ran
// Q8_0 / Q4_1 / Q4_K / Q6_K 8-10 / 5-8 / 3-5 / 8-10 % faster at 8-512 tokens on one Zen 4 thread
// (quant_kernels_bench, compact panels; expanded ones gained 2-6 %, their best at two chains), 32
// served sequences 1.13-1.25x; a token alone (decode) is unchanged.
// The integer sums and the float steps after them are the same, so are the bits.
constexpr int kChains = 4;

// dots[u] + the KW code registers w times token u's activation bytes (q + u * cols, 4 per
// register) for n <= kChains tokens, k-outer so that the n chains interleave.
template <int KW>
[[gnu::always_inline]] RADIX_AVX512_VNNI inline void DotChains(const __m512i* w, const int8_t* q,
                                                               int64_t cols, int n, __m512i* dots) {
#pragma GCC unroll 8
  for (int k = 0; k < KW; ++k) {
#pragma GCC unroll 4
    for (int u = 0; u < n; ++u) {
      dots[u] = _mm512_dpbusd_epi32(dots[u], w[k], _mm512_set1_epi32(Load32(q + u * cols + 4 * k)));
    }
  }
}

// y[t][0..15] (masked) for tokens t0..t0+T-1 over one panel.
template <class Panel, int KW, bool kMin, int T>
RADIX_AVX512_VNNI void Tile(const Panel& panel, const ref::QuantizedActivations& a, int64_t t0,
                            float* y, int64_t ldy, __mmask16 mask) {
  const int64_t subs = a.subs, sub = 4 * KW;
  const int8_t* q = a.q.data() + t0 * a.cols;
  const float* d = a.d.data() + t0 * subs;
  const float* s = a.s.data() + t0 * subs;
  const int32_t* bias = a.bias.data() + t0 * subs;
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t j = 0; j < subs; ++j) {
    __m512i w[KW];
    __m512 scale, min;
    panel.template Load<KW>(j, w, &scale, &min);
#pragma GCC unroll 8
    for (int t = 0; t < T; t += kChains) {
      const int n = std::min(kChains, T - t);
      __m512i dot[kChains];
#pragma GCC unroll 4
      for (int u = 0; u < n; ++u) dot[u] = _mm512_set1_epi32(bias[(t + u) * subs + j]);
      DotChains<KW>(w, q + t * a.cols + j * sub, a.cols, n, dot);
#pragma GCC unroll 4
      for (int u = 0; u < n; ++u) {
        acc[t + u] = AddSubBlock<kMin>(acc[t + u], dot[u], scale, d[(t + u) * subs + j], min,
                                       s[(t + u) * subs + j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * ldy, mask, acc[t]);
}

// Tile on integer super-block sums (the K-quants; quant_kernels.h's SumsSuperBlocks).
template <class Panel, int T>
RADIX_AVX512_VNNI void SuperTile(const Panel& panel, const ref::QuantizedActivations& a, int64_t t0,
                                 float* y, int64_t ldy, __mmask16 mask) {
  constexpr int kSubs = Panel::kSubs, kKW = Panel::kKW;
  const int64_t subs = a.subs, sub = 4 * kKW;
  const int8_t* q = a.q.data() + t0 * a.cols;
  const float* d = a.d.data() + t0 * subs;
  const int16_t* sums = a.sums.data() + t0 * subs;
  const int32_t* bias = a.bias.data() + t0 * subs;  // Q6_K's -32 * sum(q)
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < subs / kSubs; ++b) {
    __m512i isum[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    for (int js = 0; js < kSubs; ++js) {
      const int64_t j = kSubs * b + js;
      __m512i w[kKW];
      panel.Codes(b, js, w);
      const __m512i sc = panel.Scales(b, js);
#pragma GCC unroll 8
      for (int t = 0; t < T; t += kChains) {
        const int n = std::min(kChains, T - t);
        __m512i dot[kChains];
#pragma GCC unroll 4
        for (int u = 0; u < n; ++u) {
          dot[u] =
              Panel::kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(bias[(t + u) * subs + j]);
        }
        DotChains<kKW>(w, q + t * a.cols + j * sub, a.cols, n, dot);
#pragma GCC unroll 4
        for (int u = 0; u < n; ++u)
          isum[t + u] = _mm512_add_epi32(isum[t + u], _mm512_mullo_epi32(dot[u], sc));
      }
    }
    __m512 dw, neg_dmin;
    __m512i mins[4];
    panel.Super(b, &dw, &neg_dmin, mins);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      if constexpr (Panel::kMin) {
        const __m512i imin = MinSums(mins, sums + t * subs + kSubs * b);
        acc[t] = AddSuperBlock(acc[t], isum[t], imin, dw, neg_dmin, d[t * subs + kSubs * b]);
      } else {
        acc[t] = AddSuperBlock(acc[t], isum[t], dw, d[t * subs + kSubs * b]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * ldy, mask, acc[t]);
}

// SuperTile<Panel, count> for a count of 1 to kMaxTokens (kT: 0 .. kMaxTokens - 1).
template <class Panel, int... kT>
RADIX_AVX512_VNNI void SuperTileOf(int64_t count, const Panel& panel,
                                   const ref::QuantizedActivations& a, int64_t t0, float* y,
                                   int64_t ldy, __mmask16 mask,
                                   std::integer_sequence<int, kT...> /*counts*/) {
  ((count == kT + 1 ? SuperTile<Panel, kT + 1>(panel, a, t0, y, ldy, mask) : void()), ...);
}

// Tokens [tokens.begin, tokens.end) over one super panel in tiles of up to kMaxTokens, the first
// read through `first` (which may fetch ahead).
template <class Panel>
RADIX_AVX512_VNNI void SuperAllTokens(const Panel& first, const Panel& panel,
                                      const ref::QuantizedActivations& a, TokenRange tokens,
                                      float* y, int64_t ldy, __mmask16 mask) {
  for (int64_t t0 = tokens.begin; t0 < tokens.end; t0 += kMaxTokens) {
    SuperTileOf(std::min(kMaxTokens, tokens.end - t0), t0 == tokens.begin ? first : panel, a, t0, y,
                ldy, mask, std::make_integer_sequence<int, kMaxTokens>());
  }
}

// The last tile, of t_end - t0 (1 to kMaxTokens - 1) tokens.
template <class Panel, int KW, bool kMin>
RADIX_AVX512_VNNI void TailTile(const Panel& panel, const ref::QuantizedActivations& a, int64_t t0,
                                int64_t t_end, float* y, int64_t ldy, __mmask16 mask) {
  switch (t_end - t0) {
    case 1:
      return Tile<Panel, KW, kMin, 1>(panel, a, t0, y, ldy, mask);
    case 2:
      return Tile<Panel, KW, kMin, 2>(panel, a, t0, y, ldy, mask);
    case 3:
      return Tile<Panel, KW, kMin, 3>(panel, a, t0, y, ldy, mask);
    case 4:
      return Tile<Panel, KW, kMin, 4>(panel, a, t0, y, ldy, mask);
    case 5:
      return Tile<Panel, KW, kMin, 5>(panel, a, t0, y, ldy, mask);
    case 6:
      return Tile<Panel, KW, kMin, 6>(panel, a, t0, y, ldy, mask);
    case 7:
      return Tile<Panel, KW, kMin, 7>(panel, a, t0, y, ldy, mask);
    default:
      return;
  }
}

// Tokens [tokens.begin, tokens.end) over one panel, in tiles of up to kMaxTokens; the first tile
// reads it through `first` (which may fetch ahead: CodePanel::next), the others through `panel`.
template <class Panel, int KW, bool kMin>
RADIX_AVX512_VNNI void AllTokens(const Panel& first, const Panel& panel,
                                 const ref::QuantizedActivations& a, TokenRange tokens, float* y,
                                 int64_t ldy, __mmask16 mask) {
  int64_t t0 = tokens.begin;
  for (; t0 + kMaxTokens <= tokens.end; t0 += kMaxTokens) {
    Tile<Panel, KW, kMin, kMaxTokens>(t0 == tokens.begin ? first : panel, a, t0, y, ldy, mask);
  }
  if (t0 < tokens.end) {
    TailTile<Panel, KW, kMin>(t0 == tokens.begin ? first : panel, a, t0, tokens.end, y, ldy, mask);
  }
}

// The end of the whole groups of 16 tokens of `tokens` that run on AMX tiles (tokens.begin when
// none do): those were laid out as tiles (a.tiles, for every whole group of a's rows), and there
// are at least kQuantAmxMinTokens of them.
int64_t AmxGroupsEnd(const ref::QuantizedActivations& a, TokenRange tokens) {
  if (a.tiles.empty() || tokens.begin % 16 != 0) return tokens.begin;
  const int64_t end = tokens.begin + (std::min(tokens.end, a.n / 16 * 16) - tokens.begin) / 16 * 16;
  return end - tokens.begin >= kQuantAmxMinTokens ? end : tokens.begin;
}

// AmxBlocks::expand for code panels: the code groups less the offset, then the float D and M.
RADIX_AVX512_VNNI void ExpandCodesForAmx(const AmxBlocks& blocks, int64_t j0, int64_t count,
                                         uint8_t* tiles, float* scale, float* min) {
  const int64_t stride = PanelSubBytes(32, kRows);
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(blocks.offset));
  for (int64_t k = 0; k < count; ++k) {
    const uint8_t* sub = blocks.panel + (j0 + k) * stride;
    for (int g = 0; g < 8; ++g) {
      _mm512_store_si512(tiles + 512 * k + 64 * g,
                         _mm512_sub_epi8(_mm512_loadu_si512(sub + 64 * g), offset));
    }
    _mm512_store_ps(scale + 16 * k, _mm512_loadu_ps(sub + 512));
    _mm512_store_ps(min + 16 * k, _mm512_loadu_ps(sub + 512 + 64));
  }
}

RADIX_AVX512_VNNI void CodeAllTokens(WeightFormat format, const uint8_t* panel,
                                     const ref::QuantizedActivations& a, TokenRange tokens,
                                     float* y, int64_t ldy, __mmask16 mask, Lookahead ahead = {}) {
  const QuantFormatInfo info = FormatInfo(format, false);
  // The whole groups of 16 tokens on AMX tiles (the same bits), the rest below.
  const int64_t groups_end = AmxGroupsEnd(a, tokens);
  if (groups_end > tokens.begin) {
    RADIX_CHECK_MSG(info.sub == 32, "AMX-INT8 block groups need blocks of 32");
    AmxBlockTokens({ExpandCodesForAmx, panel, info.offset, info.has_min}, a, tokens.begin,
                   groups_end, y, ldy, mask, ahead);
    if (groups_end == tokens.end) return;
    tokens.begin = groups_end;
  }
  const CodePanel codes{panel, PanelSubBytes(info.sub, kRows),
                        tokens.end - tokens.begin <= kMaxTokens};
  const CodePanel first = FetchingAhead(codes, ahead, a.subs);
  if (info.has_min) return AllTokens<CodePanel, 8, true>(first, codes, a, tokens, y, ldy, mask);
  AllTokens<CodePanel, 8, false>(first, codes, a, tokens, y, ldy, mask);
}

// Compact panel -> code panel (what the panel's Load does per token tile, done once): subs
// sub-blocks of 4 * KW elements.
template <class Panel, int KW>
RADIX_AVX512_VNNI void ExpandCompact(const Panel& source, int64_t subs, uint8_t* codes) {
  const int64_t stride = PanelSubBytes(4 * KW, kRows);
  for (int64_t j = 0; j < subs; ++j) {
    __m512i w[KW];
    __m512 scale, min;
    source.template Load<KW>(j, w, &scale, &min);
    uint8_t* dst = codes + j * stride;
    for (int k = 0; k < KW; ++k) _mm512_storeu_si512(dst + 64 * k, w[k]);
    _mm512_storeu_ps(dst + 64 * KW, scale);
    _mm512_storeu_ps(dst + 64 * KW + 64, min);
  }
}

// Token count above which kExpand tiles expand a compact panel to codes once.
constexpr int64_t kExpandTokens = 16;

// Token count above which a compact panel is expanded to codes once rather than decoded per
// tile (quant_matmul.h's QuantTiles).
int64_t ExpandAbove(WeightFormat format, QuantTiles tiles) {
  if (tiles == QuantTiles::kExpand) return kExpandTokens;
  return format == WeightFormat::kQ6_K ? kQ6CompactMaxTokens : std::numeric_limits<int64_t>::max();
}

// AmxBlocks::expand for compact panels: each block's code registers as the VNNI tiles load them,
// less the offset, and its D and M.
template <WeightFormat kFormat>
RADIX_AVX512_VNNI void ExpandCompactForAmx(const AmxBlocks& blocks, int64_t j0, int64_t count,
                                           uint8_t* tiles, float* scale, float* min) {
  const CompactPanel<kFormat> panel{blocks.panel};
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(blocks.offset));
  for (int64_t k = 0; k < count; ++k) {
    __m512i w[8];
    __m512 d, m;
    panel.template Load<8, false>(j0 + k, w, &d, &m);
    for (int g = 0; g < 8; ++g) {
      _mm512_store_si512(tiles + 512 * k + 64 * g, _mm512_sub_epi8(w[g], offset));
    }
    _mm512_store_ps(scale + 16 * k, d);
    _mm512_store_ps(min + 16 * k, m);
  }
}

// Tokens `tokens` over one compact panel: whole groups of 16 on AMX tiles (AmxBlockTokens, a
// chunk of the panel laid out at a time), the rest decoded per token tile for a few tokens
// (decode steps, which stream the panel), expanded once into a code panel for more (prefill,
// which reuses it).
template <WeightFormat kFormat>
RADIX_AVX512_VNNI void CompactOrExpanded(const CompactPanel<kFormat>& panel,
                                         const ref::QuantizedActivations& a, TokenRange tokens,
                                         float* y, int64_t ldy, __mmask16 mask, Lookahead ahead,
                                         QuantTiles tiles) {
  using Panel = CompactPanel<kFormat>;
  constexpr bool kMin = HasMin(kFormat);
  const int64_t groups_end = AmxGroupsEnd(a, tokens);
  if (groups_end > tokens.begin) {
    const AmxBlocks blocks{ExpandCompactForAmx<kFormat>, panel.panel,
                           FormatInfo(kFormat, false).offset, kMin};
    AmxBlockTokens(blocks, a, tokens.begin, groups_end, y, ldy, mask, ahead);
    if (groups_end == tokens.end) return;
    tokens.begin = groups_end;
  }
  if (tokens.end - tokens.begin <= ExpandAbove(kFormat, tiles)) {
    // A single tile streams the panel once: only several tiles leave time to fetch the next.
    const Panel first =
        tokens.end - tokens.begin > kMaxTokens ? FetchingAhead(panel, ahead, a.subs) : panel;
    return AllTokens<Panel, 8, kMin>(first, panel, a, tokens, y, ldy, mask);
  }
  thread_local std::vector<uint8_t> codes;
  const int64_t subs = a.cols / 32;
  const auto bytes = static_cast<size_t>(subs * PanelSubBytes(32, kRows));
  if (codes.size() < bytes) codes.resize(bytes);
  ExpandCompact<Panel, 8>(panel, subs, codes.data());
  CodeAllTokens(kFormat, codes.data(), a, tokens, y, ldy, mask, ahead);
}

// A compact super panel expanded into its ExpandedSuperPanel's layout.
template <class Panel>
RADIX_AVX512_VNNI void ExpandSuper(const Panel& source, int64_t supers, uint8_t* out) {
  using Expanded = ExpandedSuperPanel<Panel>;
  for (int64_t b = 0; b < supers; ++b) {
    uint8_t* dst = out + b * Expanded::kSuperBytes;
    for (int js = 0; js < Panel::kSubs; ++js) {
      __m512i w[Panel::kKW];
      source.Codes(b, js, w);
      for (int k = 0; k < Panel::kKW; ++k) _mm512_storeu_si512(dst + 64 * k, w[k]);
      _mm512_storeu_si512(dst + Panel::kKW * 64, source.Scales(b, js));
      dst += Expanded::kSubBytes;
    }
    StoreSuperHeader(source, b, dst);
  }
}

// Tokens `tokens` over one K-quant compact panel on integer super-block sums: whole groups
// of 16 on AMX tiles (AmxSuperTokens), a few tokens decoding the panel per tile,
// more over the panel expanded once.
template <WeightFormat kFormat>
RADIX_AVX512_VNNI void SuperCompactOrExpanded(const uint8_t* bytes,
                                              const ref::QuantizedActivations& a, TokenRange tokens,
                                              float* y, int64_t ldy, __mmask16 mask,
                                              Lookahead ahead, QuantTiles tiles) {
  const CompactSuperPanel<kFormat> panel{bytes};
  const int64_t supers = a.subs / CompactSuperPanel<kFormat>::kSubs;
  const int64_t groups_end = AmxGroupsEnd(a, tokens);
  if (groups_end > tokens.begin) {
    AmxSuperTokens(kFormat, bytes, a, tokens.begin, groups_end, y, ldy, mask, ahead);
    if (groups_end < tokens.end) {
      SuperAllTokens(panel, panel, a, {groups_end, tokens.end}, y, ldy, mask);
    }
    return;
  }
  if (tokens.end - tokens.begin <= ExpandAbove(kFormat, tiles)) {
    // A single tile streams the panel once: only several tiles leave time to fetch the next.
    const CompactSuperPanel<kFormat> first =
        tokens.end - tokens.begin > kMaxTokens ? FetchingAhead(panel, ahead, a.subs) : panel;
    return SuperAllTokens(first, panel, a, tokens, y, ldy, mask);
  }
  using Expanded = ExpandedSuperPanel<CompactSuperPanel<kFormat>>;
  thread_local std::vector<uint8_t> codes;
  const auto size = static_cast<size_t>(supers * Expanded::kSuperBytes);
  if (codes.size() < size) codes.resize(size);
  ExpandSuper(panel, supers, codes.data());
  const Expanded expanded{codes.data()};
  SuperAllTokens(FetchingAhead(expanded, ahead, a.subs), expanded, a, tokens, y, ldy, mask);
}

RADIX_AVX512_VNNI void CompactAllTokens(WeightFormat format, const uint8_t* panel,
                                        const ref::QuantizedActivations& a, TokenRange tokens,
                                        float* y, int64_t ldy, __mmask16 mask, QuantTiles tiles,
                                        Lookahead ahead = {}) {
  using F = WeightFormat;
  switch (format) {
    case F::kQ4_0:
      return CompactOrExpanded<F::kQ4_0>({panel}, a, tokens, y, ldy, mask, ahead, tiles);
    case F::kQ4_1:
      return CompactOrExpanded<F::kQ4_1>({panel}, a, tokens, y, ldy, mask, ahead, tiles);
    case F::kQ5_0:
      return CompactOrExpanded<F::kQ5_0>({panel}, a, tokens, y, ldy, mask, ahead, tiles);
    case F::kQ5_1:
      return CompactOrExpanded<F::kQ5_1>({panel}, a, tokens, y, ldy, mask, ahead, tiles);
    case F::kQ8_0:
      return CompactOrExpanded<F::kQ8_0>({panel}, a, tokens, y, ldy, mask, ahead, tiles);
    case F::kQ4_K:
      return SuperCompactOrExpanded<F::kQ4_K>(panel, a, tokens, y, ldy, mask, ahead, tiles);
    case F::kQ5_K:
      return SuperCompactOrExpanded<F::kQ5_K>(panel, a, tokens, y, ldy, mask, ahead, tiles);
    case F::kQ6_K:
      return SuperCompactOrExpanded<F::kQ6_K>(panel, a, tokens, y, ldy, mask, ahead, tiles);
    case F::kMXFP4:
      return CompactOrExpanded<F::kMXFP4>({panel}, a, tokens, y, ldy, mask, ahead, tiles);
    default:
      RADIX_CHECK_MSG(false, "no compact panels for this format");
  }
}

__mmask16 RowMask(int64_t rows, int64_t row0) {
  const int64_t valid = std::min(kRows, rows - row0);
  return static_cast<__mmask16>((1u << valid) - 1u);
}

// Compact-panel packing of rows [row0, row0 + 16) (clamped to the last row).
RADIX_AVX512_VNNI void PackCompactPanel(const WeightMatrix& w, int64_t row0, uint8_t* out) {
  const int64_t row_bytes = w.row_bytes();
  // The header gather addresses 16 rows with int32 byte offsets.
  RADIX_CHECK(row_bytes < (int64_t{1} << 31) / kRows);
  const auto* data = static_cast<const uint8_t*>(w.data);
  const uint8_t* rows[kRows];
  alignas(64) int32_t offsets[kRows];
  for (int64_t r = 0; r < kRows; ++r) {
    const int64_t row = std::min(row0 + r, w.rows - 1);
    rows[r] = data + row * row_bytes;
    offsets[r] = static_cast<int32_t>((row - row0) * row_bytes);
  }
  PackCompact(w.format, rows, _mm512_load_si512(offsets), w.cols / 32, out);
}

RADIX_AVX512_VNNI void Run(const WeightMatrix& w, const ref::QuantizedActivations& a,
                           int64_t panel_begin, int64_t panel_end, float* y) {
  const QuantFormatInfo info = FormatInfo(w.format, false);
  const int64_t subs = w.cols / info.sub;
  const bool super = SumsSuperBlocks(w.format);
  thread_local std::vector<uint8_t> panel;
  const auto panel_bytes =
      static_cast<size_t>(super ? w.cols / 256 * CompactLayoutBlockBytes(w.format, kRows)
                                : subs * PanelSubBytes(info.sub, kRows));
  if (panel.size() < panel_bytes) panel.resize(panel_bytes);
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const int64_t row0 = p * kRows;
    const __mmask16 mask = RowMask(w.rows, row0);
    if (super) {
      // The packed form's panels (scalar packing), so both give the same bits.
      PackCompactLayoutPanel(w, row0, kRows, panel.data());
      CompactAllTokens(w.format, panel.data(), a, {0, a.n}, y + row0, w.rows, mask,
                       QuantTiles::kExpand);
    } else if (PerCallCompact(w.format)) {
      PackCompactPanel(w, row0, panel.data());
      // The per-call path (weights left unpacked) keeps the expanding tiles it always had.
      CompactAllTokens(w.format, panel.data(), a, {0, a.n}, y + row0, w.rows, mask,
                       QuantTiles::kExpand);
    } else {
      PackPanelScalar(w, row0, kRows, false, panel.data());
      CodeAllTokens(w.format, panel.data(), a, {0, a.n}, y + row0, w.rows, mask);
    }
  }
}

// Packed form, every block format compact: Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 in the panels above
// (same bytes as the source), Q4_K / Q5_K / Q6_K / MXFP4 in the shared layout (near the source
// size).
int64_t PackedPanelBytes(const WeightMatrix& w) {
  if (HasCompactPanels(w.format)) return kRows * w.row_bytes();
  return (w.cols / BlockElements(w.format)) * CompactLayoutBlockBytes(w.format, kRows);
}

int64_t PackedBytes(const WeightMatrix& w) {
  return (w.rows + kRows - 1) / kRows * PackedPanelBytes(w);
}

RADIX_AVX512_VNNI void Pack(const WeightMatrix& w, int64_t panel_begin, int64_t panel_end,
                            uint8_t* out) {
  const int64_t panel_bytes = PackedPanelBytes(w);
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    if (HasCompactPanels(w.format)) {
      PackCompactPanel(w, p * kRows, out + p * panel_bytes);
    } else {
      PackCompactLayoutPanel(w, p * kRows, kRows, out + p * panel_bytes);
    }
  }
}

RADIX_AVX512_VNNI void RunPacked(const WeightMatrix& w, const uint8_t* packed,
                                 const ref::QuantizedActivations& a, int64_t panel_begin,
                                 int64_t panel_end, float* y, QuantTiles tiles) {
  const int64_t panel_bytes = PackedPanelBytes(w);
  const int64_t block = TokenBlock(a.cols);
  for (int64_t t0 = 0; t0 < a.n; t0 += block) {
    const TokenRange tokens{t0, std::min(a.n, t0 + block)};
    for (int64_t p = panel_begin; p < panel_end; ++p) {
      const int64_t row0 = p * kRows;
      const uint8_t* panel = packed + p * panel_bytes;
      const Lookahead ahead{p + 1 < panel_end ? panel + panel_bytes : nullptr, panel_bytes};
      CompactAllTokens(w.format, panel, a, tokens, y + row0, w.rows, RowMask(w.rows, row0), tiles,
                       ahead);
    }
  }
}

// Super-block b of a compact super panel into the AMX groups' layout (quant_kernels.h's
// kAmxSuperBytes): vpmaddubsw gives u * sc of the even and of the odd bytes in 16-bit lanes
// (Q6_K then subtracts 32 * sc), whose low and high bytes are blended into the two tiles. A step
// of 64 elements holds 64 / sub sub-blocks, each kKW groups of 64 bytes.
template <class Panel>
RADIX_AVX512_VNNI void ExpandSuperForAmx(const Panel& source, int64_t b, uint8_t* out) {
  constexpr int kPerStep = 64 / (4 * Panel::kKW);
  constexpr __mmask64 kOdd = 0xAAAAAAAAAAAAAAAAull;
  for (int js = 0; js < Panel::kSubs; ++js) {
    __m512i w[Panel::kKW];
    source.Codes(b, js, w);
    const __m512i sc = source.Scales(b, js);  // int32 lanes
    const __m512i sc16 =
        _mm512_or_si512(_mm512_and_si512(sc, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(sc, 16));
    const __m512i even_sc = _mm512_and_si512(sc16, _mm512_set1_epi16(0x00FF));  // bytes (sc, 0)
    const __m512i odd_sc = _mm512_slli_epi16(even_sc, 8);                       // bytes (0, sc)
    const __m512i offset = _mm512_slli_epi16(sc16, 5);  // 32 * sc, Q6_K's codes being u - 32
    uint8_t* low = out + (js / kPerStep) * 2048 + (js % kPerStep) * Panel::kKW * 64;
    uint8_t* high = low + 1024;
    for (int k = 0; k < Panel::kKW; ++k) {
      __m512i even = _mm512_maddubs_epi16(w[k], even_sc);
      __m512i odd = _mm512_maddubs_epi16(w[k], odd_sc);
      if constexpr (!Panel::kMin) {
        even = _mm512_sub_epi16(even, offset);
        odd = _mm512_sub_epi16(odd, offset);
      }
      _mm512_storeu_si512(low + 64 * k,
                          _mm512_mask_blend_epi8(kOdd, even, _mm512_slli_epi16(odd, 8)));
      _mm512_storeu_si512(high + 64 * k,
                          _mm512_mask_blend_epi8(kOdd, _mm512_srli_epi16(even, 8), odd));
    }
  }
  StoreSuperHeader(source, b, out + 4 * 2048);
}

}  // namespace

RADIX_AVX512_VNNI void ExpandSuperBlockForAmx(WeightFormat format, const uint8_t* panel, int64_t b,
                                              uint8_t* out) {
  switch (format) {
    case WeightFormat::kQ4_K:
      return ExpandSuperForAmx(CompactSuperPanel<WeightFormat::kQ4_K>{panel}, b, out);
    case WeightFormat::kQ5_K:
      return ExpandSuperForAmx(CompactSuperPanel<WeightFormat::kQ5_K>{panel}, b, out);
    case WeightFormat::kQ6_K:
      return ExpandSuperForAmx(CompactSuperPanel<WeightFormat::kQ6_K>{panel}, b, out);
    default:
      RADIX_CHECK_MSG(false, "no super-block panels for this format");
  }
}

const QuantVariant* Avx512VnniQuantVariant() {
  static const QuantVariant variant{
      "avx512_vnni", kRows, false, Run, QuantizeActivationRowsAvx512, PackedBytes, Pack, RunPacked};
  return CpuHasAvx512Vnni() ? &variant : nullptr;
}

}  // namespace radixserve::kernels::x86

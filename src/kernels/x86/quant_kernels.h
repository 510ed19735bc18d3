// Shared pieces of the integer (VNNI / AVX2) quantized MatMul variants.
//
// The kernels multiply a "panel" of P consecutive weight rows (P = 16 for AVX-512, 8 for AVX2)
// with activations quantized by ref::QuantizeActivationRows. Every weight sub-block (32 elements,
// 16 for Q6_K) is first decoded to unsigned codes u with
//     weight = D * (u - offset) + M
// where offset is a per-format constant and D, M are per row and sub-block floats. A token's
// contribution of one sub-block is then D * d_a * (sum(u * q) - offset * sum(q)) + M * s_a, with
// the integer part exact; the bias term -offset * sum(q) comes with the activations. (Every
// variant sums the K-quants' sub-blocks in integers first and scales once per super-block: see
// SumsSuperBlocks below.)
//
// Panel layout, per sub-block j (stride PanelSubBytes): sub/4 groups of [P rows][4 bytes] of
// codes (one SIMD register of dword lanes per group: lane r holds elements 4g..4g+3 of row r),
// then float D[P], then float M[P]. Rows past the matrix end repeat the last row.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "kernels/matmul.h"
#include "kernels/mxfp4.h"
#include "kernels/quant_matmul.h"
#include "kernels/ref/activation_quant.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels::x86 {

// MXFP4's doubled E2M1 values [-12, 12] become unsigned codes value + kMxfp4CodeOffset.
inline constexpr int32_t kMxfp4CodeOffset = 12;
// The E2M1 nibbles as those codes: a byte-shuffle table for the kernels.
alignas(16) inline constexpr std::array<int8_t, 16> kMxfp4Codes = [] {
  std::array<int8_t, 16> codes{};
  for (int i = 0; i < 16; ++i) codes[i] = static_cast<int8_t>(kMxfp4Values[i] + kMxfp4CodeOffset);
  return codes;
}();

// Tokens [begin, end) of a matmul's activations.
struct TokenRange {
  int64_t begin = 0;
  int64_t end = 0;
};

struct QuantFormatInfo {
  int64_t sub = 32;      // elements per sub-block
  int32_t offset = 0;    // subtracted from the codes
  bool has_min = false;  // M is nonzero (Q4_1, Q5_1, Q4_K, Q5_K)
};

// signed_q8: Q8_0 codes stay signed int8 (offset 0, for the AVX2 sign trick) instead of
// being shifted by 128 into unsigned bytes.
QuantFormatInfo FormatInfo(WeightFormat format, bool signed_q8);

inline int64_t PanelSubBytes(int64_t sub, int64_t panel_rows) {
  return sub * panel_rows + 8 * panel_rows;
}

// Scalar decode of one block into codes u[BlockElements], D and M per sub-block.
void DecodeBlockCodes(WeightFormat format, const uint8_t* block, bool signed_q8, uint8_t* u,
                      float* scale, float* min);

// Packs rows [row0, row0 + panel_rows) of w (clamped to the last row) into `panel` with plain
// scalar code; the fallback for formats without a SIMD packer.
void PackPanelScalar(const WeightMatrix& w, int64_t row0, int64_t panel_rows, bool signed_q8,
                     uint8_t* panel);

// Compact panels: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K kept at their block size or
// near it (0.56, 0.63, 0.69, 0.75, 1.06, 0.59, 0.72 and 0.83 bytes per weight, against 1.25-1.5
// for code panels), for decode steps that stream the weights. Per block of P rows, lanes of 4
// bytes per row as in code panels:
//   Q4_0, Q4_1 (32-element blocks): 4 registers of the blocks' own nibble bytes (register g,
//         lane r, byte e: byte 4g + e of row r's codes, low nibble = element 4g + e, high nibble
//         = element 16 + 4g + e); then the half-precision d[P] and (Q4_1) m[P] as stored.
//   Q5_0, Q5_1 (32-element blocks): Q4_0's / Q4_1's 4 registers of nibble bytes, then a fifth
//         register of the blocks' high bits (lane r, byte e, bit k: bit 4 of element 4k + e, as
//         Q5_K's); then d[P] and (Q5_1) m[P] as stored.
//   Q8_0 (32-element blocks): 8 registers of the signed codes (register g, lane r: elements
//         4g..4g+3 of row r); then the half-precision d[P].
//   MXFP4 (32-element blocks): 4 registers of the blocks' own E2M1 nibble bytes, arranged as
//         Q4_0's; then float D[P] = 2^(e - 128) (the kernels map each nibble to its code, the
//         doubled E2M1 value + 12, with a byte shuffle). 0.63 bytes per weight.
// Per 256-element block:
//   Q4_K: for each of the 8 sub-blocks j, 4 registers of nibble pairs (register g, lane r, byte
//         e: low nibble = element 32j + 4g + e, high nibble = element 32j + 16 + 4g + e); then
//         the 6-bit scales sc[8][P] and mins m[8][P] as bytes; then float d[P], dmin[P].
//         D = d * sc and M = -dmin * m, the same floats DecodeBlockCodes computes.
//   Q5_K: as Q4_K with a fifth register per sub-block after its 4 nibble registers: bit k of
//         byte e of lane r is bit 4 of element 32j + 4k + e.
//   Q6_K: for each of the 16 sub-blocks j, 2 registers of nibble pairs of the low 4 bits (low
//         nibble = element 16j + 4g + e, high nibble = element 16j + 8 + 4g + e) and one register
//         of high bits (bits 2k, 2k + 1 of byte e: bits 4-5 of element 16j + 4k + e); then the
//         int8 scales sc[16][P]; then float d[P]. D = d * sc.
bool HasCompactPanelLayout(WeightFormat format);
// Bytes of one block (BlockElements(format) columns) of a P-row panel.
constexpr int64_t CompactLayoutBlockBytes(WeightFormat format, int64_t panel_rows) {
  // Q4_K: 8 x 4 registers of codes, sc and m bytes, d and dmin floats. Q6_K: 16 x 3 registers,
  // sc bytes, d floats.
  switch (format) {
    case WeightFormat::kQ4_0:
      return panel_rows * (16 + 2);
    case WeightFormat::kQ4_1:
    case WeightFormat::kMXFP4:
      return panel_rows * (16 + 4);
    case WeightFormat::kQ5_0:
      return panel_rows * (16 + 4 + 2);
    case WeightFormat::kQ5_1:
      return panel_rows * (16 + 4 + 4);
    case WeightFormat::kQ8_0:
      return panel_rows * (32 + 2);
    case WeightFormat::kQ4_K:
      return panel_rows * (8 * 16 + 8 + 8 + 8);
    case WeightFormat::kQ5_K:
      return panel_rows * (8 * 20 + 8 + 8 + 8);
    default:
      return panel_rows * (16 * 12 + 16 + 4);
  }
}
// Packs rows [row0, row0 + panel_rows) of w (clamped to the last row), all blocks.
void PackCompactLayoutPanel(const WeightMatrix& w, int64_t row0, int64_t panel_rows,
                            uint8_t* panel);

// One instruction-set variant: computes y rows [panel_begin * P, min(panel_end * P, w.rows))
// for all a.n tokens. y is [a.n][w.rows]. Called concurrently on disjoint panel ranges.
struct QuantVariant {
  std::string_view name;
  int64_t panel_rows;
  bool signed_q8;
  void (*run)(const WeightMatrix& w, const ref::QuantizedActivations& a, int64_t panel_begin,
              int64_t panel_end, float* y);
  // Load-time repacking into the variant's own panel layout (nullptr / 0 when unsupported):
  // packed_bytes(w) is the buffer size (0: format not packable); pack fills panels
  // [panel_begin, panel_end) of it; run_packed is `run` reading that buffer instead of w.data.
  // Activation quantization (ref::QuantizeActivationRows or a SIMD twin with equal results).
  void (*quantize)(WeightFormat weight, int32_t offset, const float* x, int64_t begin, int64_t end,
                   ref::QuantizedActivations* out) = nullptr;
  int64_t (*packed_bytes)(const WeightMatrix& w) = nullptr;
  void (*pack)(const WeightMatrix& w, int64_t panel_begin, int64_t panel_end,
               uint8_t* out) = nullptr;
  void (*run_packed)(const WeightMatrix& w, const uint8_t* packed,
                     const ref::QuantizedActivations& a, int64_t panel_begin, int64_t panel_end,
                     float* y, QuantTiles tiles) = nullptr;
};

// ref::QuantizeActivationRows with AVX-512 (F/BW/VL/DQ); bit-identical results.
void QuantizeActivationRowsAvx512(WeightFormat weight, int32_t offset, const float* x,
                                  int64_t begin, int64_t end, ref::QuantizedActivations* out);
// An all-zero 256-block b of a row: zero codes, and zero scales, sums and biases for its
// sub-blocks [first, last).
inline void ZeroBlockK(int64_t b, int64_t first, int64_t last, int8_t* q, float* d, float* s,
                       int32_t* bias, int16_t* sums) {
  std::fill(q + b, q + b + 256, int8_t{0});
  std::fill(d + first, d + last, 0.0f);
  std::fill(s + first, s + last, 0.0f);
  std::fill(bias + first, bias + last, 0);
  std::fill(sums + first, sums + last, int16_t{0});
}

// RowK of both variants: a row of `cols` values in 256-blocks of sub-blocks of `sub`, kRun blocks
// at a time so that one vector division gives the run's scales (two dependent divisions per block
// otherwise). first_largest(x) is a block's first value of the largest magnitude (zero when all
// are zero); scales(max, iscale, scale) sets iscale = -127 / max and scale = 1 / iscale for the
// run's kRun lanes as the scalar code divides (lanes whose max is zero are not read); block(offset,
// x, iscale, scale, sub, q, first, d, s, bias, sums) quantizes a block whose sub-blocks start at
// `first`.
template <int kRun, typename FirstLargest, typename Scales, typename Block>
inline void QuantizeRowKInRuns(int32_t offset, const float* x, int64_t cols, int64_t sub, int8_t* q,
                               float* d, float* s, int32_t* bias, int16_t* sums,
                               FirstLargest first_largest, Scales scales, Block block) {
  for (int64_t b0 = 0; b0 < cols; b0 += kRun * 256) {
    const int64_t blocks = std::min<int64_t>(kRun, (cols - b0) / 256);
    alignas(64) float max[kRun] = {};
    alignas(64) float iscale[kRun], scale[kRun];
    for (int64_t j = 0; j < blocks; ++j) max[j] = first_largest(x + b0 + 256 * j);
    scales(max, iscale, scale);
    for (int64_t j = 0; j < blocks; ++j) {
      const int64_t b = b0 + 256 * j, first = b / sub;
      if (max[j] == 0.0f) {
        ZeroBlockK(b, first, (b + 256) / sub, q, d, s, bias, sums);
      } else {
        block(offset, x + b, iscale[j], scale[j], sub, q + b, first, d, s, bias, sums);
      }
    }
  }
}

// The row loop both share: row k of x goes to row_k(offset, x, cols, sub, q, d, s, bias, sums)
// for formats of 256-element blocks (Q8_K), else to row_32(weight, offset, x, subs, ...).
template <typename RowK, typename Row32>
inline void QuantizeRowsWith(WeightFormat weight, int32_t offset, const float* x, int64_t begin,
                             int64_t end, ref::QuantizedActivations* out, RowK row_k,
                             Row32 row_32) {
  const int64_t cols = out->cols, subs = out->subs;
  for (int64_t t = begin; t < end; ++t) {
    int8_t* q = out->q.data() + t * cols;
    float* d = out->d.data() + t * subs;
    float* s = out->s.data() + t * subs;
    int32_t* bias = out->bias.data() + t * subs;
    int16_t* sums = out->sums.data() + t * subs;
    if (BlockElements(weight) == 256) {
      row_k(offset, x + t * cols, cols, out->sub, q, d, s, bias, sums);
    } else {
      row_32(weight, offset, x + t * cols, subs, q, d, s, bias, sums);
    }
  }
}

// The same with AVX2 (and F16C for the scales' float16 rounding helpers, which stay scalar).
void QuantizeActivationRowsAvx2(WeightFormat weight, int32_t offset, const float* x, int64_t begin,
                                int64_t end, ref::QuantizedActivations* out);

// The next panel a thread will read, fetched into L2 a slice per sub-block while the tiles of the
// current one compute, so a batch's weight stream overlaps its arithmetic instead of stalling
// the next panel's first pass.
struct Lookahead {
  const uint8_t* next = nullptr;  // nullptr: nothing to fetch
  int64_t bytes = 0;
  // Bytes fetched per sub-block of a panel of `subs`: a whole-line share, so one pass over the
  // panel fetches all of the next.
  int64_t Chunk(int64_t subs) const { return ((bytes + subs - 1) / subs + 63) / 64 * 64; }
};

// Sub-block j's share of the next panel (Lookahead), fetched into L2 while this one computes.
[[gnu::always_inline]] inline void PrefetchNext(const uint8_t* next, int64_t chunk, int64_t j) {
  for (int64_t line = 0; next != nullptr && line < chunk; line += 64) {
    FetchL2(next + j * chunk + line);
  }
}

// One token's sub-block added to its accumulator of 16 rows: acc + float(dot) * (scale * d), then
// + min * s when kMin (dot: the sub-block's int32 sums with the bias; scale, min: the rows' D and
// M; d, s: the token's). The VNNI and the AMX tiles both add their sums through this, so their
// results are the same bits.
template <bool kMin>
[[gnu::always_inline]] RADIX_AVX512 inline __m512 AddSubBlock(__m512 acc, __m512i dot, __m512 scale,
                                                              float d, __m512 min, float s) {
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(scale, _mm512_set1_ps(d)), acc);
  if constexpr (kMin) acc = _mm512_fmadd_ps(min, _mm512_set1_ps(s), acc);
  return acc;
}

// The K-quants (SumsSuperBlocks) sum in integers over each 256-element super-block, as llama.cpp's
// Q4_K x Q8_K does: per token and row, isum = sum_j sc_j * dot_j over the sub-blocks (sc_j the
// sub-block's scale, dot_j = sum((u - offset) * q)) and, for Q4_K and Q5_K, imin = sum_j m_j *
// sum_j(q) (m_j the 6-bit min), both exact in int32; then one float step per super-block
// (AddSuperBlock). The VNNI tiles multiply dot_j by sc_j (the avx2 ones widen their 16-bit sums
// against sc_j, avx2_quant_matmul.cpp); the AMX groups take sc_j into the codes
// ((u - offset) * sc: Q4_K's and Q5_K's below 2048, Q6_K's within +-4096, as a tile of low bytes
// and one of signed high bytes), so a tile product runs 64 deep and the sub-blocks need no float
// work between them.
//
// The per-super-block part of a super-block panel, 384 bytes: float d[16] and -dmin[16] (the
// rows' block scales), then the mins as 4 registers of int16 pairs (lane r of register p: m_2p,
// m_2p+1 of row r), ready for vpdpwssd with a token's pairs of sub-block sums (Q6_K: zeros).
inline constexpr int64_t kSuperHeaderBytes = 2 * 64 + 4 * 64;
// A super-block of a panel laid out for the AMX groups: for each 64-element step s (sub-blocks
// 2s, 2s + 1; Q6_K's 4s..4s + 3), the weight tile of the low bytes of (u - offset) * sc, then
// that of the high bytes (16 groups of [16 rows][4 bytes], group g = elements 64s + 4g..4g+3),
// 1 KB each; then the header.
inline constexpr int64_t kAmxSuperBytes = 4 * 2 * 1024 + kSuperHeaderBytes;

// imin for one token: mins (the header's 4 registers) times the token's sub-block sums of the
// super-block (8 int16, read as 4 pairs).
[[gnu::always_inline]] RADIX_AVX512_VNNI inline __m512i MinSums(const __m512i* mins,
                                                                const int16_t* sums) {
  __m512i imin = _mm512_setzero_si512();
  for (int p = 0; p < 4; ++p) {
    int32_t pair;
    std::memcpy(&pair, sums + 2 * p, sizeof(pair));
    imin = _mm512_dpwssd_epi32(imin, mins[p], _mm512_set1_epi32(pair));
  }
  return imin;
}

// One token's super-block added to its accumulator of 16 rows: acc + float(isum) * (d * d_a) +
// float(imin) * (-dmin * d_a). The VNNI and AMX tiles both finish a super-block through this, so
// their results are the same bits.
[[gnu::always_inline]] RADIX_AVX512 inline __m512 AddSuperBlock(__m512 acc, __m512i isum,
                                                                __m512i imin, __m512 d,
                                                                __m512 neg_dmin, float da) {
  const __m512 vda = _mm512_set1_ps(da);
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, vda), acc);
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin), _mm512_mul_ps(neg_dmin, vda), acc);
}

// The same without mins (Q6_K): acc + float(isum) * (d * d_a).
[[gnu::always_inline]] RADIX_AVX512 inline __m512 AddSuperBlock(__m512 acc, __m512i isum, __m512 d,
                                                                float da) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(da)), acc);
}

// Super-block b of a K-quant compact panel (16 rows) laid out for the AMX groups at out
// (kAmxSuperBytes, 64-byte aligned).
void ExpandSuperBlockForAmx(WeightFormat format, const uint8_t* panel, int64_t b, uint8_t* out);

// Tokens [t0, t1) (whole groups of 16) over a K-quant compact panel of 16 rows on AMX-INT8
// tiles, one super-block at a time: it is laid out for them (ExpandSuperBlockForAmx, into L1),
// then two groups of 16 tokens at a time multiply it (a.tiles are 64 columns wide) and finish
// the super-block as the VNNI tiles do (MinSums, AddSuperBlock), so the results are theirs bit
// for bit. mask, t0, ahead: as AmxBlockTokens.
void AmxSuperTokens(WeightFormat format, const uint8_t* panel, const ref::QuantizedActivations& a,
                    int64_t t0, int64_t t1, float* y, int64_t ldy, uint16_t mask,
                    const Lookahead& ahead);

// Blocks of a panel laid out in turn as the AMX groups read them (AmxBlockTokens).
inline constexpr int64_t kAmxChunkBlocks = 4;  // blocks per chunk
struct AmxBlocks {
  // Blocks [j0, j0 + count) (count <= kAmxChunkBlocks) of `panel` (16 rows, 32-element blocks)
  // into L1: at tiles, each block's weight tile of signed codes u - offset (8 groups of [16
  // rows][4 bytes], as the code registers), 512 bytes per block; at scale and min, 16 floats per
  // block, the rows' D and M.
  void (*expand)(const AmxBlocks& blocks, int64_t j0, int64_t count, uint8_t* tiles, float* scale,
                 float* min);
  const uint8_t* panel;
  int32_t offset;  // QuantFormatInfo's
  bool has_min;    // M is nonzero
};

// Tokens [t0, t1) (whole groups of 16) over a panel of 16 rows of 32-element blocks (compact
// panels of Q4_0, Q4_1, Q5_0, Q8_0 and MXFP4, or code panels) on AMX-INT8 tiles: a chunk of
// blocks at a time is laid out into L1 (blocks.expand), TDPBSSD multiplies 16 tokens' signed
// activations of a block by its signed weight tile (no offset term), each weight tile serving
// two groups of 16 tokens, and then the chunk's int32 sums are scaled as the VNNI tiles scale
// theirs, block by block in order (AddSubBlock), so the results are theirs bit for bit. mask:
// the panel rows y holds. Reads a.tiles (32 columns wide); t0 % 16 == 0. The first group
// fetches `ahead` into L2. Requires AmxInt8Usable() (x86/amx.h).
void AmxBlockTokens(const AmxBlocks& blocks, const ref::QuantizedActivations& a, int64_t t0,
                    int64_t t1, float* y, int64_t ldy, uint16_t mask, const Lookahead& ahead);

// nullptr when the CPU lacks the instructions (AVX-512 F/BW/VL + VNNI; AVX2 + FMA).
const QuantVariant* Avx512VnniQuantVariant();
const QuantVariant* Avx2QuantVariant();

}  // namespace radixserve::kernels::x86

// The quantized matmul's code panels on AMX-INT8 tiles (quant_kernels.h's AmxCodeTokens).
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized on its own _mm512_undefined_* helpers
// when inlined into masked intrinsics; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "common/check.h"
#include "kernels/x86/amx.h"
#include "kernels/x86/quant_kernels.h"

#define RADIX_AMX_INT8                                                          \
  __attribute__((                                                               \
      target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni,amx-tile," \
             "amx-int8")))

namespace radixserve::kernels::x86 {
namespace {

constexpr int64_t kRows = 16;  // rows per panel, and tokens per activation tile

// Tiles 0, 1, 4 and 5: the int32 sums of 16 tokens x 16 rows of four consecutive sub-blocks (their
// products all run before the first is scaled, so the scaling does not wait on a tile store);
// tiles 2 and 6: 16 tokens' activations of a sub-block (`sub` bytes each); tiles 3 and 7: the
// sub-block's codes, sub / 4 groups of 64 bytes.
void ConfigureCodeTiles(int64_t sub) {
  const auto groups = static_cast<uint8_t>(sub / 4);
  const auto bytes = static_cast<uint16_t>(sub);
  const uint8_t rows[8] = {16, 16, 16, groups, 16, 16, 16, groups};
  const uint16_t colsb[8] = {64, 64, bytes, 64, 64, 64, bytes, 64};
  ConfigureTiles(rows, colsb);
}

// TDPBSUD: activations (signed) times codes (unsigned) into int32. The code groups of a
// sub-block are the weight tile's layout: group g, lane r holds elements 4g..4g+3 of row r.
// Sub-blocks j..j+kDepth-1 into sums[0..kDepth).
constexpr int kDepth = 4;
// q: the first sub-block's activation tile, the next ones every 16 * sub bytes (a.tiles).
RADIX_AMX_INT8 inline void SubBlockSums4(const int8_t* q, int64_t sub, const uint8_t* codes,
                                         int64_t stride, int32_t* sums) {
  const int64_t ldq = sub, next = 16 * sub;
  _tile_loadd(2, q, ldq);
  _tile_loadd(3, codes, 64);
  _tile_loadd(6, q + next, ldq);
  _tile_loadd(7, codes + stride, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_dpbsud(0, 2, 3);
  _tile_dpbsud(1, 6, 7);
  _tile_loadd(2, q + 2 * next, ldq);
  _tile_loadd(3, codes + 2 * stride, 64);
  _tile_loadd(6, q + 3 * next, ldq);
  _tile_loadd(7, codes + 3 * stride, 64);
  _tile_zero(4);
  _tile_zero(5);
  _tile_dpbsud(4, 2, 3);
  _tile_dpbsud(5, 6, 7);
  _tile_stored(0, sums, 64);
  _tile_stored(1, sums + 256, 64);
  _tile_stored(4, sums + 512, 64);
  _tile_stored(5, sums + 768, 64);
}

RADIX_AMX_INT8 inline void SubBlockSums1(const int8_t* q, int64_t ldq, const uint8_t* codes,
                                         int32_t* out) {
  _tile_loadd(2, q, ldq);
  _tile_loadd(3, codes, 64);
  _tile_zero(0);
  _tile_dpbsud(0, 2, 3);
  _tile_stored(0, out, 64);
}

// acc[i] (token i's 16 rows) += sub-blocks j0..j0+kCount-1 from their int32 sums, token by token,
// each sub-block in order: the VNNI tile's float operations (avx512_quant_matmul.cpp's Tile).
template <int KW, bool kMin, bool kBias, int kCount>
[[gnu::always_inline]] RADIX_AMX_INT8 inline void Scale(const uint8_t* codes, int64_t stride,
                                                        const int32_t (*sums)[kRows * 16],
                                                        const float* d, const float* s,
                                                        const int32_t* bias, int64_t subs,
                                                        int64_t j0, __m512* acc) {
  __m512 scale[kCount];
  __m512 min[kCount];
  for (int k = 0; k < kCount; ++k) {
    const uint8_t* panel = codes + (j0 + k) * stride;
    scale[k] = _mm512_loadu_ps(panel + 64 * KW);
    min[k] = kMin ? _mm512_loadu_ps(panel + 64 * KW + 64) : _mm512_setzero_ps();
  }
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) {
    const float* di = d + i * subs + j0;
    const float* si = s + i * subs + j0;
    [[maybe_unused]] const int32_t* bi = bias + i * subs + j0;
#pragma GCC unroll 4
    for (int k = 0; k < kCount; ++k) {
      __m512i dot = _mm512_load_si512(sums[k] + 16 * i);
      // bias is 0 for codes without an offset: adding it changes nothing.
      if constexpr (kBias) dot = _mm512_add_epi32(dot, _mm512_set1_epi32(bi[k]));
      acc[i] = AddSubBlock<kMin>(acc[i], dot, scale[k], di[k], min[k], si[k]);
    }
  }
}

// Tokens [t0, t1), whole groups of 16, over one code panel of sub-blocks of 4 * KW elements.
// Per token and sub-block the float work is the VNNI tile's (avx512_quant_matmul.cpp's Tile):
// dot = bias + sum(u * q) as int32, acc += float(dot) * (D * d_a), then acc += M * s_a.
template <int KW, bool kMin, bool kBias>
RADIX_AMX_INT8 void Groups(const uint8_t* codes, const ref::QuantizedActivations& a, int64_t t0,
                           int64_t t1, float* y, int64_t ldy, __mmask16 mask,
                           const Lookahead& ahead) {
  constexpr int64_t sub = 4 * KW;
  const int64_t subs = a.subs, stride = PanelSubBytes(sub, kRows);
  alignas(64) int32_t sums[kDepth][kRows * 16];
  const int64_t next_chunk = ahead.Chunk(subs);  // PrefetchNext skips a null next
  for (int64_t t = t0; t < t1; t += kRows) {
    const int8_t* q = a.tiles.data() + t * a.cols;  // group t / 16: its tiles, subs * 16 * sub
    const float* d = a.d.data() + t * subs;
    const float* s = a.s.data() + t * subs;
    const int32_t* bias = a.bias.data() + t * subs;
    __m512 acc[kRows];
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t j0 = 0, depth = 0; j0 < subs; j0 += depth) {
      depth = subs - j0 >= kDepth ? kDepth : 1;
      // The first group fetches the next panel into L2 as it goes.
      for (int64_t j = j0; t == t0 && j < j0 + depth; ++j) PrefetchNext(ahead.next, next_chunk, j);
      if (depth == kDepth) {
        SubBlockSums4(q + j0 * 16 * sub, sub, codes + j0 * stride, stride, sums[0]);
        Scale<KW, kMin, kBias, kDepth>(codes, stride, sums, d, s, bias, subs, j0, acc);
      } else {
        SubBlockSums1(q + j0 * 16 * sub, sub, codes + j0 * stride, sums[0]);
        Scale<KW, kMin, kBias, 1>(codes, stride, sums, d, s, bias, subs, j0, acc);
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) _mm512_mask_storeu_ps(y + (t + i) * ldy, mask, acc[i]);
  }
}

// Super-block panels (quant_kernels.h's kAmxSuperBytes), two groups of 16 tokens at a time:
// tiles 0 and 1 sum the first group's products with the low (TDPBSUD) and the signed high
// (TDPBSSD) bytes of (u - offset) * sc over
// the four 64-element steps of a super-block, tiles 4 and 5 the second group's; tiles 2 and 6
// hold a step's activations of the two groups, tiles 3 and 7 its low and high weight tiles, each
// loaded once for both groups.
void ConfigureSuperTiles() {
  const uint8_t rows[8] = {16, 16, 16, 16, 16, 16, 16, 16};
  const uint16_t colsb[8] = {64, 64, 64, 64, 64, 64, 64, 64};
  ConfigureTiles(rows, colsb);
}

// The int32 sums of a super-block (q: a group's first step tile, the next every 1 KB): low and
// high of one group, or of two (q2, 32 tokens).
RADIX_AMX_INT8 inline void SuperSums2(const int8_t* q, const int8_t* q2, const uint8_t* tiles,
                                      int32_t (*sums)[kRows * 16]) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(4);
  _tile_zero(5);
  for (int64_t step = 0; step < 4; ++step) {
    _tile_loadd(2, q + step * 1024, 64);
    _tile_loadd(6, q2 + step * 1024, 64);
    _tile_loadd(3, tiles + step * 2048, 64);
    _tile_loadd(7, tiles + step * 2048 + 1024, 64);
    _tile_dpbsud(0, 2, 3);
    _tile_dpbssd(1, 2, 7);
    _tile_dpbsud(4, 6, 3);
    _tile_dpbssd(5, 6, 7);
  }
  _tile_stored(0, sums[0], 64);
  _tile_stored(1, sums[1], 64);
  _tile_stored(4, sums[2], 64);
  _tile_stored(5, sums[3], 64);
}

RADIX_AMX_INT8 inline void SuperSums1(const int8_t* q, const uint8_t* tiles,
                                      int32_t (*sums)[kRows * 16]) {
  _tile_zero(0);
  _tile_zero(1);
  for (int64_t step = 0; step < 4; ++step) {
    _tile_loadd(2, q + step * 1024, 64);
    _tile_loadd(3, tiles + step * 2048, 64);
    _tile_loadd(7, tiles + step * 2048 + 1024, 64);
    _tile_dpbsud(0, 2, 3);
    _tile_dpbssd(1, 2, 7);
  }
  _tile_stored(0, sums[0], 64);
  _tile_stored(1, sums[1], 64);
}

// acc (16 tokens' rows of 16, starting at token t of the activations) += super-block b (of
// kSubs sub-blocks) from its low and high sums: isum = low + 256 * high, finished as the VNNI
// super tile finishes it.
template <int kSubs>
[[gnu::always_inline]] RADIX_AMX_INT8 inline void FinishSuper(
    const int32_t* low, const int32_t* high, const uint8_t* header,
    const ref::QuantizedActivations& a, int64_t t, int64_t b, bool first, float* acc,
    const uint8_t* fetch, int64_t lines) {
  constexpr bool kMin = kSubs == 8;  // Q4_K, Q5_K; Q6_K has none
  const int64_t subs = a.subs;
  const float* d = a.d.data() + t * subs + kSubs * b;
  const int16_t* sums = a.sums.data() + t * subs + kSubs * b;
  const __m512 dw = _mm512_load_ps(header);
  const __m512 neg_dmin = _mm512_load_ps(header + 64);
  __m512i mins[4];
  for (int p = 0; p < 4; ++p) mins[p] = _mm512_load_si512(header + 128 + 64 * p);
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) {
    // A share of the next panel's lines per token: a burst of them would stall on fill buffers.
    for (int64_t line = i * lines / kRows; fetch != nullptr && line < (i + 1) * lines / kRows;
         ++line) {
      _mm_prefetch(reinterpret_cast<const char*>(fetch + 64 * line), _MM_HINT_T1);
    }
    const __m512i isum = _mm512_add_epi32(_mm512_load_si512(low + 16 * i),
                                          _mm512_slli_epi32(_mm512_load_si512(high + 16 * i), 8));
    const __m512 before = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + 16 * i);
    __m512 after;
    if constexpr (kMin) {
      after =
          AddSuperBlock(before, isum, MinSums(mins, sums + i * subs), dw, neg_dmin, d[i * subs]);
    } else {
      after = AddSuperBlock(before, isum, dw, d[i * subs]);
    }
    _mm512_storeu_ps(acc + 16 * i, after);
  }
}

template <int kSubs>
RADIX_AMX_INT8 void SuperGroups(WeightFormat format, const uint8_t* panel,
                                const ref::QuantizedActivations& a, int64_t t0, int64_t t1,
                                float* y, int64_t ldy, __mmask16 mask, const Lookahead& ahead) {
  const int64_t supers = a.subs / kSubs;
  alignas(64) uint8_t tiles[kAmxSuperBytes];
  alignas(64) int32_t sums[4][kRows * 16];
  thread_local std::vector<float> acc_buffer;
  const auto floats = static_cast<size_t>((t1 - t0) * 16);
  if (acc_buffer.size() < floats) acc_buffer.resize(floats);
  float* acc = acc_buffer.data();
  const int64_t next_chunk = ahead.Chunk(supers);
  const uint8_t* header = tiles + 4 * 2048;
  for (int64_t b = 0; b < supers; ++b) {
    ExpandSuperBlockForAmx(format, panel, b, tiles);
    // The first group finishing this super-block fetches its share of the next panel.
    const uint8_t* fetch = ahead.next != nullptr ? ahead.next + b * next_chunk : nullptr;
    const int64_t lines = next_chunk / 64;
    int64_t t = t0;
    for (; t + 2 * kRows <= t1; t += 2 * kRows, fetch = nullptr) {
      const int8_t* q = a.tiles.data() + t * a.cols + 4 * b * 1024;  // group t / 16, step 4b
      SuperSums2(q, q + kRows * a.cols, tiles, sums);
      FinishSuper<kSubs>(sums[0], sums[1], header, a, t, b, b == 0, acc + (t - t0) * 16, fetch,
                         lines);
      FinishSuper<kSubs>(sums[2], sums[3], header, a, t + kRows, b, b == 0,
                         acc + (t + kRows - t0) * 16, nullptr, 0);
    }
    if (t < t1) {
      SuperSums1(a.tiles.data() + t * a.cols + 4 * b * 1024, tiles, sums);
      FinishSuper<kSubs>(sums[0], sums[1], header, a, t, b, b == 0, acc + (t - t0) * 16, fetch,
                         lines);
    }
  }
  for (int64_t t = t0; t < t1; ++t) {
    _mm512_mask_storeu_ps(y + t * ldy, mask, _mm512_loadu_ps(acc + (t - t0) * 16));
  }
}

// Q8_0 compact panels (avx512_quant_matmul.cpp's PackCompact): a block is 8 registers of codes
// u = q + 128, group g lane r holding elements 4g..4g+3 of row r, so the block's 512 code bytes
// are a weight tile of 8 rows as laid out; then the rows' 16 half-precision scales. A chunk of
// blocks is copied into L1 with the codes flipped back to signed q, which TDPBSSD (signed by
// signed) multiplies without the offset's bias term.
constexpr int64_t kQ8BlockBytes = kRows * 34;
constexpr int64_t kQ8Chunk = 4;  // blocks multiplied before their sums are scaled

// Blocks [0, count) of a chunk as signed weight tiles, 512 bytes each, and their scales.
RADIX_AMX_INT8 inline void Q8SignedTiles(const uint8_t* chunk, int64_t count, uint8_t* tiles,
                                         __m512* scale) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t k = 0; k < count; ++k) {
    const uint8_t* block = chunk + k * kQ8BlockBytes;
    for (int g = 0; g < 8; ++g) {
      _mm512_store_si512(tiles + k * 512 + 64 * g,
                         _mm512_xor_si512(_mm512_loadu_si512(block + 64 * g), flip));
    }
    scale[k] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 512)));
  }
}

// The int32 sums of blocks [0, count) (count <= kQ8Chunk, signed weight tiles every 512 bytes)
// of one group of 16 tokens (q: its first block's activation tile, the next every 512 bytes), or
// of two (q2), into sums[block][group]: each weight tile is loaded once for both groups.
template <bool kTwo>
RADIX_AMX_INT8 inline void Q8Sums(const int8_t* q, const int8_t* q2, const uint8_t* blocks,
                                  int64_t count, int32_t (*sums)[2][kRows * 16]) {
  for (int64_t k = 0; k < count; ++k) {
    _tile_loadd(3, blocks + k * 512, 64);
    _tile_loadd(2, q + k * 512, 32);
    _tile_zero(0);
    _tile_dpbssd(0, 2, 3);
    if constexpr (kTwo) {
      _tile_loadd(6, q2 + k * 512, 32);
      _tile_zero(4);
      _tile_dpbssd(4, 6, 3);
    }
    _tile_stored(0, sums[k][0], 64);
    if constexpr (kTwo) _tile_stored(4, sums[k][1], 64);
  }
}

// acc (16 tokens' rows of 16, token t of the activations) += blocks j0..j0 + count - 1 from the
// group's sums (sums[k][group]), each as the VNNI tile adds it (AddSubBlock): sum(q_w * q) is the
// VNNI tile's bias + sum(u * q), the same int32.
[[gnu::always_inline]] RADIX_AMX_INT8 inline void Q8Scale(const int32_t (*sums)[2][kRows * 16],
                                                          int group, const __m512* scale,
                                                          const ref::QuantizedActivations& a,
                                                          int64_t t, int64_t j0, int64_t count,
                                                          bool first, float* acc,
                                                          const uint8_t* fetch, int64_t lines) {
  const int64_t subs = a.subs;
  const float* d = a.d.data() + t * subs + j0;
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) {
    // A share of the next panel's lines per token: a burst of them would stall on fill buffers.
    for (int64_t line = i * lines / kRows; fetch != nullptr && line < (i + 1) * lines / kRows;
         ++line) {
      _mm_prefetch(reinterpret_cast<const char*>(fetch + 64 * line), _MM_HINT_T1);
    }
    __m512 sum = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + 16 * i);
    for (int64_t k = 0; k < count; ++k) {
      sum = AddSubBlock<false>(sum, _mm512_load_si512(sums[k][group] + 16 * i), scale[k],
                               d[i * subs + k], _mm512_setzero_ps(), 0.0f);
    }
    _mm512_storeu_ps(acc + 16 * i, sum);
  }
}

}  // namespace

RADIX_AMX_INT8 void AmxQ8Tokens(const uint8_t* panel, const ref::QuantizedActivations& a,
                                int64_t t0, int64_t t1, float* y, int64_t ldy, uint16_t mask,
                                const Lookahead& ahead) {
  RADIX_CHECK_MSG(a.tile_cols == 32, "AMX-INT8 Q8_0 groups need tiles one block wide");
  ConfigureCodeTiles(32);
  const int64_t blocks = a.subs;
  alignas(64) int32_t sums[kQ8Chunk][2][kRows * 16];
  alignas(64) uint8_t tiles[kQ8Chunk * 512];
  thread_local std::vector<float> acc_buffer;
  const auto floats = static_cast<size_t>((t1 - t0) * 16);
  if (acc_buffer.size() < floats) acc_buffer.resize(floats);
  float* acc = acc_buffer.data();
  const int64_t next_chunk = ahead.Chunk(blocks);
  for (int64_t j0 = 0; j0 < blocks; j0 += kQ8Chunk) {
    const int64_t count = std::min(kQ8Chunk, blocks - j0);
    __m512 scale[kQ8Chunk];
    Q8SignedTiles(panel + j0 * kQ8BlockBytes, count, tiles, scale);
    // The first group scaling this chunk fetches its share of the next panel.
    const uint8_t* fetch = ahead.next != nullptr ? ahead.next + j0 * next_chunk : nullptr;
    const int64_t lines = count * next_chunk / 64;
    const bool first = j0 == 0;
    int64_t t = t0;
    for (; t + 2 * kRows <= t1; t += 2 * kRows, fetch = nullptr) {
      const int8_t* q = a.tiles.data() + t * a.cols + j0 * 512;  // group t / 16, block j0
      Q8Sums<true>(q, q + kRows * a.cols, tiles, count, sums);
      Q8Scale(sums, 0, scale, a, t, j0, count, first, acc + (t - t0) * 16, fetch, lines);
      Q8Scale(sums, 1, scale, a, t + kRows, j0, count, first, acc + (t + kRows - t0) * 16, nullptr,
              0);
    }
    if (t < t1) {
      Q8Sums<false>(a.tiles.data() + t * a.cols + j0 * 512, nullptr, tiles, count, sums);
      Q8Scale(sums, 0, scale, a, t, j0, count, first, acc + (t - t0) * 16, fetch, lines);
    }
  }
  ReleaseTiles();
  for (int64_t t = t0; t < t1; ++t) {
    _mm512_mask_storeu_ps(y + t * ldy, mask, _mm512_loadu_ps(acc + (t - t0) * 16));
  }
}

void AmxCodeTokens(const uint8_t* codes, int64_t sub, bool has_min, bool has_offset,
                   const ref::QuantizedActivations& a, int64_t t0, int64_t t1, float* y,
                   int64_t ldy, uint16_t mask, const Lookahead& ahead) {
  RADIX_CHECK_MSG(sub == 32, "AMX-INT8 groups need sub-blocks of 32");
  RADIX_CHECK_MSG(a.tile_cols == sub, "AMX-INT8 groups need tiles one sub-block wide");
  ConfigureCodeTiles(sub);
  if (has_min) {
    if (has_offset) {
      Groups<8, true, true>(codes, a, t0, t1, y, ldy, mask, ahead);
    } else {
      Groups<8, true, false>(codes, a, t0, t1, y, ldy, mask, ahead);
    }
  } else {
    Groups<8, false, true>(codes, a, t0, t1, y, ldy, mask, ahead);
  }
  ReleaseTiles();
}

void AmxSuperTokens(WeightFormat format, const uint8_t* panel, const ref::QuantizedActivations& a,
                    int64_t t0, int64_t t1, float* y, int64_t ldy, uint16_t mask,
                    const Lookahead& ahead) {
  RADIX_CHECK_MSG(a.tile_cols == 64, "AMX-INT8 super-block groups need tiles 64 columns wide");
  ConfigureSuperTiles();
  if (format == WeightFormat::kQ6_K) {
    SuperGroups<16>(format, panel, a, t0, t1, y, ldy, mask, ahead);
  } else {
    SuperGroups<8>(format, panel, a, t0, t1, y, ldy, mask, ahead);
  }
  ReleaseTiles();
}

}  // namespace radixserve::kernels::x86

// The quantized matmul on AMX-INT8 tiles: 32-element blocks (quant_kernels.h's AmxBlockTokens)
// and the K-quants' super-blocks (AmxSuperTokens).
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

// Token i's share (of kRows) of `lines` cache lines at fetch (the next panel; nullptr: none),
// into L2: spread over a group's tokens, since a burst of them would stall on fill buffers.
[[gnu::always_inline]] inline void FetchTokenShare(const uint8_t* fetch, int64_t lines, int i) {
  for (int64_t line = i * lines / kRows; fetch != nullptr && line < (i + 1) * lines / kRows;
       ++line) {
    FetchL2(fetch + 64 * line);
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
    FetchTokenShare(fetch, lines, i);
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

// Blocks of 32: tiles 0 and 4 hold a block's int32 sums of two groups of 16 tokens x 16 rows,
// tiles 2 and 6 the groups' activations of the block (32 bytes each), tile 3 its weight tile (8
// groups of 64 bytes).
void ConfigureBlockTiles() {
  const uint8_t rows[8] = {16, 16, 16, 8, 16, 16, 16, 8};
  const uint16_t colsb[8] = {64, 64, 32, 64, 64, 64, 32, 64};
  ConfigureTiles(rows, colsb);
}

// The int32 sums of blocks [0, count) (signed weight tiles every 512 bytes) of one group of 16
// tokens (q: its first block's activation tile, the next every 512 bytes), or of two (q2), into
// sums[block][group]: each weight tile is loaded once for both groups.
template <bool kTwo>
RADIX_AMX_INT8 inline void BlockSums(const int8_t* q, const int8_t* q2, const uint8_t* tiles,
                                     int64_t count, int32_t (*sums)[2][kRows * 16]) {
  for (int64_t k = 0; k < count; ++k) {
    _tile_loadd(3, tiles + k * 512, 64);
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
// group's sums (sums[k][group]), each as the VNNI tile adds it (AddSubBlock): sum((u - offset) *
// q) is the VNNI tile's bias + sum(u * q), the same int32. Each token fetches its share of
// `fetch` (FetchTokenShare).
template <bool kMin>
[[gnu::always_inline]] RADIX_AMX_INT8 inline void ScaleBlocks(
    const int32_t (*sums)[2][kRows * 16], int group, const float (*scale)[16],
    const float (*min)[16], const ref::QuantizedActivations& a, int64_t t, int64_t j0,
    int64_t count, bool first, float* acc, const uint8_t* fetch, int64_t lines) {
  const int64_t subs = a.subs;
  const float* d = a.d.data() + t * subs + j0;
  [[maybe_unused]] const float* s = a.s.data() + t * subs + j0;
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) {
    FetchTokenShare(fetch, lines, i);
    __m512 sum = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + 16 * i);
    for (int64_t k = 0; k < count; ++k) {
      sum = AddSubBlock<kMin>(sum, _mm512_load_si512(sums[k][group] + 16 * i),
                              _mm512_load_ps(scale[k]), d[i * subs + k],
                              kMin ? _mm512_load_ps(min[k]) : _mm512_setzero_ps(),
                              kMin ? s[i * subs + k] : 0.0f);
    }
    _mm512_storeu_ps(acc + 16 * i, sum);
  }
}

template <bool kMin>
RADIX_AMX_INT8 void BlockGroups(const AmxBlocks& blocks, const ref::QuantizedActivations& a,
                                int64_t t0, int64_t t1, float* y, int64_t ldy, __mmask16 mask,
                                const Lookahead& ahead) {
  const int64_t count_all = a.subs;
  alignas(64) int32_t sums[kAmxChunkBlocks][2][kRows * 16];
  alignas(64) uint8_t tiles[kAmxChunkBlocks * 512];
  alignas(64) float scale[kAmxChunkBlocks][16];
  alignas(64) float min[kAmxChunkBlocks][16];
  thread_local std::vector<float> acc_buffer;
  const auto floats = static_cast<size_t>((t1 - t0) * 16);
  if (acc_buffer.size() < floats) acc_buffer.resize(floats);
  float* acc = acc_buffer.data();
  const int64_t next_chunk = ahead.Chunk(count_all);
  for (int64_t j0 = 0; j0 < count_all; j0 += kAmxChunkBlocks) {
    const int64_t count = std::min(kAmxChunkBlocks, count_all - j0);
    blocks.expand(blocks, j0, count, tiles, scale[0], min[0]);
    // The first group scaling this chunk fetches its share of the next panel.
    const uint8_t* fetch = ahead.next != nullptr ? ahead.next + j0 * next_chunk : nullptr;
    const int64_t lines = count * next_chunk / 64;
    const bool first = j0 == 0;
    int64_t t = t0;
    for (; t + 2 * kRows <= t1; t += 2 * kRows, fetch = nullptr) {
      const int8_t* q = a.tiles.data() + t * a.cols + j0 * 512;  // group t / 16, block j0
      BlockSums<true>(q, q + kRows * a.cols, tiles, count, sums);
      ScaleBlocks<kMin>(sums, 0, scale, min, a, t, j0, count, first, acc + (t - t0) * 16, fetch,
                        lines);
      ScaleBlocks<kMin>(sums, 1, scale, min, a, t + kRows, j0, count, first,
                        acc + (t + kRows - t0) * 16, nullptr, 0);
    }
    if (t < t1) {
      BlockSums<false>(a.tiles.data() + t * a.cols + j0 * 512, nullptr, tiles, count, sums);
      ScaleBlocks<kMin>(sums, 0, scale, min, a, t, j0, count, first, acc + (t - t0) * 16, fetch,
                        lines);
    }
  }
  for (int64_t t = t0; t < t1; ++t) {
    _mm512_mask_storeu_ps(y + t * ldy, mask, _mm512_loadu_ps(acc + (t - t0) * 16));
  }
}

}  // namespace

void AmxBlockTokens(const AmxBlocks& blocks, const ref::QuantizedActivations& a, int64_t t0,
                    int64_t t1, float* y, int64_t ldy, uint16_t mask, const Lookahead& ahead) {
  RADIX_CHECK_MSG(a.tile_cols == 32, "AMX-INT8 block groups need tiles one block wide");
  ConfigureBlockTiles();
  if (blocks.has_min) {
    BlockGroups<true>(blocks, a, t0, t1, y, ldy, mask, ahead);
  } else {
    BlockGroups<false>(blocks, a, t0, t1, y, ldy, mask, ahead);
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

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/x86/amx.h"

#define RADIX_AMX_BF16 __attribute__((target("amx-tile,amx-bf16")))

namespace radixserve::kernels::x86 {
namespace {

// Every tile 16 rows of 64 bytes.
void ConfigureBf16Tiles() {
  const uint8_t rows[8] = {16, 16, 16, 16, 16, 16, 16, 16};
  const uint16_t colsb[8] = {64, 64, 64, 64, 64, 64, 64, 64};
  ConfigureTiles(rows, colsb);
}

constexpr int64_t kTileU32 = kAmxPairs * 16;  // uint32 per weight tile (1 KB)
// Tokens whose activations stay in L2 while a thread's panels pass over them.
constexpr int64_t kTokenBlock = 128;

// Where the weight tiles of TN panels come from: block kb of panel i at b[i] + kb * kTileU32 for
// the whole blocks, and the zero-padded last block at tail + i * kTileU32.
struct WeightTiles {
  const uint32_t* b[3];
  const uint32_t* tail;
};

// Two token tiles (32 tokens) x TN (1 or 2) panels: C tiles 0, 1 (first 16 tokens) and 2, 3,
// activation tiles 4 and 5, weight tiles 6 and 7. c: the 32 x 16 TN results, row stride ldc
// bytes.
template <int TN>
RADIX_AMX_BF16 void Block2(const uint32_t* a, int64_t lda, const WeightTiles& w, int64_t blocks,
                           bool tail, float* c, int64_t ldc) {
  _tile_zero(0);
  _tile_zero(2);
  if constexpr (TN > 1) {
    _tile_zero(1);
    _tile_zero(3);
  }
  const int64_t a_second = kAmxTokens * lda / 4;  // uint32 to the second token tile
  for (int64_t kb = 0; kb < blocks + (tail ? 1 : 0); ++kb) {
    const bool last = kb == blocks;
    _tile_loadd(4, a + kb * kAmxPairs, lda);
    _tile_loadd(5, a + a_second + kb * kAmxPairs, lda);
    _tile_loadd(6, last ? w.tail : w.b[0] + kb * kTileU32, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(2, 5, 6);
    if constexpr (TN > 1) {
      _tile_loadd(7, last ? w.tail + kTileU32 : w.b[1] + kb * kTileU32, 64);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  auto* second = reinterpret_cast<float*>(reinterpret_cast<char*>(c) + kAmxTokens * ldc);
  _tile_stored(0, c, ldc);
  _tile_stored(2, second, ldc);
  if constexpr (TN > 1) {
    _tile_stored(1, c + 16, ldc);
    _tile_stored(3, second + 16, ldc);
  }
}

// One token tile x TN (1 to 3) panels: C tiles 0-2, activation tile 4, weight tiles 5-7.
template <int TN>
RADIX_AMX_BF16 void Block1(const uint32_t* a, int64_t lda, const WeightTiles& w, int64_t blocks,
                           bool tail, float* c, int64_t ldc) {
  _tile_zero(0);
  if constexpr (TN > 1) _tile_zero(1);
  if constexpr (TN > 2) _tile_zero(2);
  for (int64_t kb = 0; kb < blocks + (tail ? 1 : 0); ++kb) {
    const bool last = kb == blocks;
    _tile_loadd(4, a + kb * kAmxPairs, lda);
    _tile_loadd(5, last ? w.tail : w.b[0] + kb * kTileU32, 64);
    _tile_dpbf16ps(0, 4, 5);
    if constexpr (TN > 1) {
      _tile_loadd(6, last ? w.tail + kTileU32 : w.b[1] + kb * kTileU32, 64);
      _tile_dpbf16ps(1, 4, 6);
    }
    if constexpr (TN > 2) {
      _tile_loadd(7, last ? w.tail + 2 * kTileU32 : w.b[2] + kb * kTileU32, 64);
      _tile_dpbf16ps(2, 4, 7);
    }
  }
  _tile_stored(0, c, ldc);
  if constexpr (TN > 1) _tile_stored(1, c + 16, ldc);
  if constexpr (TN > 2) _tile_stored(2, c + 32, ldc);
}

using BlockFn = void (*)(const uint32_t*, int64_t, const WeightTiles&, int64_t, bool, float*,
                         int64_t);

BlockFn PickBlock(int tm, int tn) {
  if (tm == 2) return tn == 2 ? Block2<2> : Block2<1>;
  return tn == 3 ? Block1<3> : tn == 2 ? Block1<2> : Block1<1>;
}

}  // namespace

void AmxBf16PanelRange(const uint32_t* panels, int64_t pairs, int64_t rows, const uint32_t* xr,
                       int64_t ldx, int64_t n, int64_t p0, int64_t p1, float* y) {
  const int64_t stride = pairs * 16;  // uint32 per panel
  const int64_t blocks = pairs / kAmxPairs, ragged = pairs % kAmxPairs;
  const int64_t lda = ldx * 4;
  const int64_t padded_n = (n + kAmxTokens - 1) / kAmxTokens * kAmxTokens;
  // Two token tiles when there are enough tokens to share each weight tile, else three panels
  // per activation tile (decode: each weight tile is read once per step either way).
  const int max_tn = padded_n >= 2 * kAmxTokens ? 2 : 3;
  alignas(64) uint32_t tail[3 * kTileU32];
  alignas(64) float scratch[2 * kAmxTokens * 48];
  ConfigureBf16Tiles();
  for (int64_t t0 = 0; t0 < padded_n; t0 += kTokenBlock) {
    const int64_t t1 = std::min(padded_n, t0 + kTokenBlock);
    for (int64_t p = p0; p < p1; p += max_tn) {
      const int tn = static_cast<int>(std::min<int64_t>(max_tn, p1 - p));
      WeightTiles w{};
      for (int i = 0; i < tn; ++i) w.b[i] = panels + (p + i) * stride;
      if (ragged != 0) {
        std::memset(tail, 0, sizeof(tail));
        for (int i = 0; i < tn; ++i) {
          std::memcpy(tail + i * kTileU32, w.b[i] + blocks * kTileU32,
                      static_cast<size_t>(ragged * 16 * 4));
        }
        w.tail = tail;
      }
      const int64_t valid_rows = std::min<int64_t>(16 * tn, rows - p * 16);
      for (int64_t t = t0; t < t1;) {
        const int tm = t + 2 * kAmxTokens <= t1 && tn <= 2 ? 2 : 1;
        const int64_t valid_tokens = std::min<int64_t>(tm * kAmxTokens, n - t);
        const BlockFn block = PickBlock(tm, tn);
        const uint32_t* a = xr + t * ldx;
        if (valid_tokens == tm * kAmxTokens && valid_rows == 16 * tn) {
          block(a, lda, w, blocks, ragged != 0, y + t * rows + p * 16, rows * 4);
        } else {
          const int64_t ldc = 16 * tn;
          block(a, lda, w, blocks, ragged != 0, scratch, ldc * 4);
          for (int64_t i = 0; i < valid_tokens; ++i) {
            std::memcpy(y + (t + i) * rows + p * 16, scratch + i * ldc,
                        static_cast<size_t>(valid_rows) * sizeof(float));
          }
        }
        t += tm * kAmxTokens;
      }
    }
  }
  ReleaseTiles();
}

}  // namespace radixserve::kernels::x86

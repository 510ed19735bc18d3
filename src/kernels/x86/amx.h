// Intel AMX (Advanced Matrix Extensions) for the BF16 panels and the quantized code panels: eight
// tile registers of up to 16 rows x 64 bytes and a tile multiply, TDPBF16PS, that adds a 16 x 32
// bf16 block of activations times a 32 x 16 block of weights into a 16 x 16 f32 tile (Sapphire
// Rapids and later Xeons).
//
// A BF16 panel (bf16_panels.h) is already in the layout TDPBF16PS reads its second operand in:
// pair-vector p holds columns 2p and 2p + 1 of the panel's 16 rows, so 16 consecutive
// pair-vectors (1 KB) are one weight tile. The activations are the bf16 pairs of the dot_bf16
// product, padded to whole tiles.
#pragma once

#include <cstdint>

namespace radixserve::kernels::x86 {

// Pairs per tile (32 bf16 columns of the K dimension) and rows per activation tile.
constexpr int64_t kAmxPairs = 16;
constexpr int64_t kAmxTokens = 16;

// True when the CPU has AMX-TILE and AMX-BF16, the OS saves tile state (XCR0), and Linux granted
// this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked once, on the first call).
bool AmxBf16Usable();
// The same for AMX-INT8 (TDPBSUD and its kin: 16 x 64 int8 times 64 x 16 int8 into int32).
bool AmxInt8Usable();

// Loads the calling thread's tile configuration (palette 1): tile i holds rows[i] rows of
// colsb[i] bytes (0 and 0: unused). Requires AmxBf16Usable() or AmxInt8Usable().
void ConfigureTiles(const uint8_t (&rows)[8], const uint16_t (&colsb)[8]);
// Returns the calling thread's tiles to the init state (TILERELEASE), so context switches stop
// saving them.
void ReleaseTiles();

// y[t, r] for tokens [0, n) and the rows of panels [p0, p1) (16 rows each, `rows` in all, y's
// row stride), from panels of `pairs` column pairs and activations xr: bf16 pairs, row stride
// ldx >= pairs rounded up to kAmxPairs, rows padded with zeros to a multiple of kAmxTokens and
// columns past `pairs` zero. Each result adds the products of whole 16-pair blocks in order, the
// last block of a ragged panel from a zero-padded copy, so y[t, r] depends on x row t and weight
// row r only. Requires AmxBf16Usable(); configures the calling thread's tiles and releases them.
void AmxBf16PanelRange(const uint32_t* panels, int64_t pairs, int64_t rows, const uint32_t* xr,
                       int64_t ldx, int64_t n, int64_t p0, int64_t p1, float* y);

}  // namespace radixserve::kernels::x86

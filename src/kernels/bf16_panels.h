// BF16 weights repacked at load for the AVX-512 and AVX2 matmuls in "broadcast form".
//
// Layout: panels of 16 weight rows. Within a panel, column pair p (columns 2p, 2p + 1) of the 16
// rows is one 64-byte vector: dword r holds row r's two bf16 values. Rows past the matrix and the
// column after an odd last column are zero. A panel is ceil(cols / 2) * 64 bytes.
//
// Product: activations are rounded to bf16 (nearest even) and each pair-vector of a panel meets a
// token's pair broadcast to every lane (Bf16Product below), so one register holds 16 rows of one
// token and no horizontal sums are needed. A register tile covers up to 3 panels x 8 tokens on
// AVX-512 (24 accumulators), 1 panel x 6 tokens on AVX2 (12 of 8 lanes). y[t, r] adds the pairs of
// row r in column order, so it depends only on x row t and weight row r: never on n, the tile, the
// chunking or the thread count.
//
// Numerics equal FloatMatMul's kGgmlRounded contract for BF16 weights (activations rounded to
// bf16, products exact, sums in f32); only the summation order differs from the unpacked kernel.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/matmul.h"

namespace radixserve::kernels {

// True when the CPU runs the AVX-512 packed kernel (AVX-512 F/BW/VL/DQ): the kWidenFma product.
bool Bf16PanelsSupported();

// True when the kDotBf16 product runs here too (Bf16PanelsSupported() and AVX512-BF16: Cooper
// Lake, Sapphire Rapids and later Xeons, Zen 4 and later; not Skylake to Ice Lake Xeons).
bool Bf16DotSupported();

// True when the kAmxTile product runs here too (Bf16DotSupported(), AMX-BF16, and the OS grants
// the tile state).
bool Bf16AmxSupported();

// Whether the kAmxTile product's steps of up to kBf16AmxReproducedTokens tokens run on vector
// tiles that give the AMX tiles' bits (faster at decode), checked once per process on a small
// product; false without AMX-BF16, or where this CPU's tiles add differently (then every step
// stays on the tiles).
bool Bf16AmxSmallStepsReproduced();

// The most tokens a step of the kAmxTile product runs on that reproduction. One or two tokens
// read the weights faster through the vector tiles than through a tile of 16 tokens; from three
// on the reproduction's arithmetic (the tiles' two chains per pair, on 512-bit FMAs) costs more
// than the tiles' padding (Intel Xeon with AMX, 1B shape BF16, decode_step ms per step,
// reproduction against tiles: 2 streams 66 against 75, 3 streams 85 against 76, 4 streams 90
// against 76, 8 streams 136-139 against 77-80). Faster memory makes the tiles cheaper still, so
// the crossover does not move up on other AMX machines.
inline constexpr int64_t kBf16AmxReproducedTokens = 2;

// How a pair-vector of a panel meets a token's activation pair. Both compute the same products
// (exact in f32) and add them in f32; they differ in speed by CPU and in the order the two
// products of a pair are added:
//   kWidenFma: widen the bf16 pair to two f32 vectors, two fused multiply-adds (even column
//              first). vdpbf16ps issues at about a third of the FMA rate on Sapphire Rapids.
//   kDotBf16:  one vdpbf16ps (both products; full rate on Zen 4/5).
//   kAmxTile:  AMX tiles (x86/amx.h): TDPBF16PS multiplies 16 tokens by 32 columns of 16 rows at a
//              time, adding the products of each 16-pair block in an order of the hardware's own
//              (still the same for every token, batch and thread count). Needs AMX-BF16.
// kernel_choice.h picks one per machine by measurement.
enum class Bf16Product { kWidenFma, kDotBf16, kAmxTile };

// The product Bf16PanelMatMul uses in this process (kernel_choice.h's ActiveKernelChoice()).
Bf16Product ActiveBf16Product();

// True when the kernel table named `table` runs BF16 weights as panels: "avx512" (every product
// this CPU runs) and "avx2" (the widen_fma product on 8-lane vectors, x86/avx2_bf16_panels.h,
// with the same bits as the AVX-512 widen_fma) wherever those tables run.
bool Bf16PanelsFor(std::string_view table);

// Bytes of w (kBF16) in panel form.
int64_t Bf16PanelBytes(const WeightMatrix& w);

// Packs w (kBF16) into `out` (Bf16PanelBytes(w) bytes), splitting the work over pool (may be null).
void PackBf16Panels(const WeightMatrix& w, ThreadPool* pool, uint8_t* out);

// y[n, w.rows] = bf16(x[n, w.cols]) * W^T from the panels of w. Requires Bf16PanelsSupported().
void Bf16PanelMatMul(ThreadPool* pool, const float* x, int64_t n, const WeightMatrix& w,
                     const uint8_t* panels, float* y);
// The same with a given product (the calibration and the tests run both).
void Bf16PanelMatMulWith(Bf16Product product, ThreadPool* pool, const float* x, int64_t n,
                         const WeightMatrix& w, const uint8_t* panels, float* y);
// The same on AVX2 (the widen_fma product; requires Bf16PanelsFor("avx2")).
void Bf16PanelMatMulAvx2(ThreadPool* pool, const float* x, int64_t n, const WeightMatrix& w,
                         const uint8_t* panels, float* y);
// The panel product of the table named `table` (Bf16PanelsFor(table)): the avx512 table's active
// product or the avx2 table's widen_fma.
void Bf16PanelMatMulFor(std::string_view table, ThreadPool* pool, const float* x, int64_t n,
                        const WeightMatrix& w, const uint8_t* panels, float* y);

}  // namespace radixserve::kernels

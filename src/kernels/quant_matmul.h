// QuantMatMul: the integer fast path of MatMul for block-quantized weights in
// ActivationMode::kGgmlRounded, computed the way llama.cpp does: activation rows are quantized
// once per call (Q8_0 / Q8_1 / Q8_K, see ref/activation_quant.h), then integer block dot products
// (AVX-512 VNNI, or AVX2 vpmaddubsw) are scaled and summed in float. The result equals the
// reference kGgmlRounded path up to float summation order.
//
// Weights stay in their GGUF block layout; each thread packs 16 (AVX2: 8) rows at a time into a
// small row-interleaved panel and runs every token over it, so each weight byte is read once per
// call whatever n is. Rows are split across the pool in one contiguous range per thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/huge_pages.h"
#include "common/thread_pool.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"

namespace radixserve::kernels {

// The integer variant QuantMatMul uses with `table` ("avx512_vnni" or "avx2"), or "" when it
// would decline: the ref table (RADIX_KERNELS=ref keeps the scalar reference), or a CPU without
// AVX2. The avx512 table uses VNNI when the CPU has it and AVX2 otherwise.
std::string_view QuantMatMulVariant(const KernelTable& table);

// y[n, w.rows] = x[n, w.cols] * W^T with kGgmlRounded numerics. Returns false, without touching
// y, when there is no fast path (QuantMatMulVariant is "" or w is not block-quantized); the
// caller then runs the reference path. Same threading contract as MatMul.
bool QuantMatMul(const KernelTable& table, ThreadPool* pool, const float* x, int64_t n,
                 const WeightMatrix& w, float* y);

// A weight matrix repacked once at load time into the integer variant's panel layout, which
// saves the per-call transposition of rows into panels (most of the cost at decode). Every block
// format (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, MXFP4) is stored as compact panels near
// its block size (plus up to 15 padding rows). When nothing is packed,
// `panels` stays empty and the overload below runs the source matrix. The memory behind `source`
// must outlive the PackedWeight.
struct PackedWeight {
  WeightMatrix source;
  std::string_view variant;  // QuantMatMulVariant of the table it was packed for, "" if none
  LargeBuffer panels;        // on 2 MB pages where the kernel allows (common/huge_pages.h)

  bool packed() const { return !panels.empty(); }
};

// Packs w for `table` (splitting the work over pool, which may be null). Call at model load.
// BF16 matrices are packed into kernels/bf16_panels.h panels for the avx2 and avx512 tables
// (Bf16PanelsFor); F32 matrices into float_matmul.h's F32 panels; F16 (and tables without a
// packing variant) come back unpacked.
PackedWeight Pack(const KernelTable& table, ThreadPool* pool, const WeightMatrix& w);

// The bytes of panels Pack(table, pool, w) would allocate (0: it would not pack w).
int64_t PackedBytes(const KernelTable& table, const WeightMatrix& w);

// MatMul on a PackedWeight: the packed integer path when mode is kGgmlRounded and the panels
// were packed for this table's variant, else exactly MatMul(table, pool, x, n, w.source, y, mode).
void MatMul(const KernelTable& table, ThreadPool* pool, const float* x, int64_t n,
            const PackedWeight& w, float* y, ActivationMode mode = ActivationMode::kExact);

// How the avx512_vnni variant runs the token tiles of a compact panel when there are more tokens
// than one tile holds (kernel_choice.h measures which is faster on this CPU):
//   kExpand:  the panel is expanded once into byte codes with float scales (about 1.25 bytes per
//             weight) that every tile then reads: the decoding is paid once per panel;
//   kCompact: every tile decodes the compact panel itself (nibbles and 6-bit scales, about half
//             the bytes to read per tile), except Q6_K above kQ6CompactMaxTokens tokens, whose
//             16-element sub-blocks give each decode only half the products to amortize over.
// Both give the same results bit for bit. The avx2 variant always decodes per tile.
enum class QuantTiles { kExpand, kCompact };
inline constexpr int64_t kQ6CompactMaxTokens = 128;
std::string_view QuantTilesName(QuantTiles tiles);
std::optional<QuantTiles> ParseQuantTiles(std::string_view name);

// The tiles of this process (kernel_choice.h's ActiveKernelChoice()).
QuantTiles ActiveQuantTiles();

// True when the avx512_vnni variant runs kQuantAmxMinTokens or more tokens (prefill chunks, large
// batches) in groups of 16 on AMX-INT8 tiles, whose results are the VNNI tiles' bit for bit:
// where the CPU has AMX-INT8 and Linux grants the tile state, unless RADIX_QUANT_AMX=0. Decided
// once per process.
bool QuantAmxEnabled();

// True for the formats the avx512_vnni variant sums in integers over each 256-element
// super-block (x86/quant_kernels.h): Q4_K, Q5_K and Q6_K.
inline bool SumsSuperBlocks(WeightFormat format) {
  return format == WeightFormat::kQ4_K || format == WeightFormat::kQ5_K ||
         format == WeightFormat::kQ6_K;
}

// Fewer tokens stay on the VNNI tiles. The AMX groups lay out a few blocks (or a K-quant
// super-block) of the panel at a time, so one group of 16 pays: a decode step of 16 streams ran
// 1.10x faster on AMX with the 1B Q8_0 shape and 4 % faster with Q4_K_M; Q6_K alone, 16 tokens
// 1.4x (docs/performance.md, the Xeon with AMX).
inline constexpr int64_t kQuantAmxMinTokens = 16;
// "" when RADIX_QUANT_AMX is unset, 0, or 1 where AMX-INT8 is usable; otherwise the error.
std::string QuantAmxEnvironmentError();

// MatMul on a PackedWeight with the given tiles instead of ActiveQuantTiles() (for the
// calibration and the tests).
void MatMulWithTiles(QuantTiles tiles, const KernelTable& table, ThreadPool* pool, const float* x,
                     int64_t n, const PackedWeight& w, float* y, ActivationMode mode);

// Seconds per call of each tiling on the calibration problem (lower is faster).
struct QuantTilesTiming {
  double expand = 0.0;
  double compact = 0.0;
};
// Runs the calibration on one thread: a Q4_K matrix in cache times 32 tokens (a batched decode
// step), alternating rounds of both tilings, the best round of each. nullopt when `table` runs no
// avx512_vnni variant (nothing to choose). Takes a few tens of milliseconds.
std::optional<QuantTilesTiming> MeasureQuantTiles(const KernelTable& table);

// One product of a group: y[n, w.rows] = x[n, w.cols] * W^T.
struct MatMulJob {
  const float* x;
  int64_t n;
  const PackedWeight* w;
  float* y;
};

// Every job's MatMul (same results, bit for bit), as one parallel pass when the jobs are small:
// with kGgmlRounded, weights packed for this table's variant and at most kGroupedMaxTokens tokens
// per job, the activations are quantized once per job (once for consecutive jobs reading the
// same rows for matrices of one format and width) and the pool threads split the panels of all
// the jobs together, one contiguous range each, weighed by their jobs' token counts, so a step's
// many small matrices (a MoE layer's active experts at decode) cost one hand-off instead of one
// per matrix, and no thread waits at a matrix boundary or for a thread that drew the busier
// experts. Otherwise the jobs run one after the other through MatMul.
inline constexpr int64_t kGroupedMaxTokens = 16;
void GroupedMatMul(const KernelTable& table, ThreadPool* pool, std::span<const MatMulJob> jobs,
                   ActivationMode mode);

}  // namespace radixserve::kernels

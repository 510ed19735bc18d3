// Activation rounding that reproduces llama.cpp's quantized matmuls. ggml multiplies a weight in
// a block format with activations first quantized to that format's "vec dot" partner: Q8_0 for
// Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1 and Q8_K for the K-quants. Each of those integer dot products
// equals (up to float summation order) a float dot product of the dequantized weight with the
// activations after a quantize -> dequantize round trip, which is what RoundActivations computes.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/weight_format.h"

namespace radixserve::kernels::ref {

// True when `weight` is a block format whose ggml matmul quantizes activations.
bool QuantizesActivations(WeightFormat weight);

// out[count] = x[count] after the round trip through the partner format of `weight`
// (count a multiple of that format's block size). out may alias x.
//
// Q8_1 (partner of Q4_1 and Q5_1) also carries each block's sum s = d * sum(q) rounded to
// float16, which ggml multiplies with the weight block's offset m. When `sum_correction` is not
// null it receives, per 32-block, s - sum(out over the block); adding m * correction per block
// to the float dot product reproduces ggml exactly.
void RoundActivations(WeightFormat weight, const float* x, float* out, int64_t count,
                      float* sum_correction = nullptr);

// True for the formats whose partner is Q8_1 (their blocks start with float16 d, float16 m).
bool UsesBlockSums(WeightFormat weight);

// Activations quantized for integer dot products (the fast quantized MatMul), in the same
// partner formats and with the same rounding as RoundActivations: out.d[i] * out.q[j] equals
// RoundActivations' output element j of sub-block i exactly. Everything is grouped by
// "sub-blocks", the runs of elements that share one weight scale: 16 for Q6_K, 32 otherwise.
struct QuantizedActivations {
  int64_t n = 0;              // token rows
  int64_t cols = 0;           // elements per row
  int64_t sub = 32;           // elements per sub-block
  int64_t subs = 0;           // sub-blocks per row (cols / sub)
  std::vector<int8_t> q;      // [n][cols], each in [-127, 127]
  std::vector<float> d;       // [n][subs] scale of the sub-block's partner block
  std::vector<float> s;       // [n][subs] the block-sum term: Q8_1's float16 s for Q4_1/Q5_1,
                              // d * sum(q) for the K-quants, 0 otherwise
  std::vector<int32_t> bias;  // [n][subs] -weight_offset * sum(q) over the sub-block
  std::vector<int16_t> sums;  // [n][subs] sum(q) over the sub-block (|sum| <= 32 * 127)
  // q of the whole groups of 16 rows as AMX tiles (x86/amx.h), when the matmul runs on them:
  // [n / 16][cols / tile_cols][16][tile_cols], so the tile of a run of tile_cols elements is
  // 16 * tile_cols contiguous bytes. Empty otherwise.
  std::vector<int8_t> tiles;
  int64_t tile_cols = 0;
};

// Elements per weight sub-block (one weight scale): 16 for Q6_K, 32 for the other block formats.
int64_t SubBlockElements(WeightFormat weight);

// Sizes `out` for n rows of `cols` activations against `weight` (cols a multiple of its block).
void ResizeQuantizedActivations(WeightFormat weight, int64_t n, int64_t cols,
                                QuantizedActivations* out);

// Quantizes token rows [begin, end) of x ([out->n][out->cols]) into `out` (already sized).
// weight_offset is the constant the integer kernel subtracts from its unsigned weight codes;
// it only feeds `bias`. Rows are independent, so disjoint ranges may run on different threads.
void QuantizeActivationRows(WeightFormat weight, int32_t weight_offset, const float* x,
                            int64_t begin, int64_t end, QuantizedActivations* out);

}  // namespace radixserve::kernels::ref

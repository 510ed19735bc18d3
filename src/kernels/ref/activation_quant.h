// Activation rounding that reproduces llama.cpp's quantized matmuls. ggml multiplies a weight in
// a block format with activations first quantized to that format's "vec dot" partner: Q8_0 for
// Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1 and Q8_K for the K-quants. Each of those integer dot products
// equals (up to float summation order) a float dot product of the dequantized weight with the
// activations after a quantize -> dequantize round trip, which is what RoundActivations computes.
#pragma once

#include <cstdint>

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

}  // namespace radixserve::kernels::ref

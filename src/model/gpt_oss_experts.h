// gpt-oss's expert tensors from an HF checkpoint, rewritten as the canonical stacked tensors the
// MoE layer reads (blk.N.ffn_{gate,up,down}_exps.{weight,bias}, GGUF's layout).
//
// transformers keeps each layer's experts as three stacked parameters, input dimension first:
//   mlp.experts.gate_up_proj [experts, hidden, 2 * inter] with gate and up interleaved along the
//   last dimension (gate = even columns, up = odd ones), gate_up_proj_bias [experts, 2 * inter]
//   likewise, down_proj [experts, inter, hidden], down_proj_bias [experts, hidden];
// OpenAI's published checkpoints ship the two matrices in MXFP4 instead:
//   gate_up_proj_blocks [experts, 2 * inter, hidden / 32, 16] (U8, two E2M1 codes per byte,
//   element 2j in the low nibble of byte j, 2j + 1 in the high one), gate_up_proj_scales
//   [experts, 2 * inter, hidden / 32] (U8, E8M0 exponents, 2^(s - 127)); down_proj_blocks /
//   _scales likewise with [experts, hidden, inter / 32, ...].
// Float matrices are transposed to [out, in] rows and de-interleaved, keeping their element type;
// MXFP4 ones are regrouped into ggml's MXFP4 blocks (exponent byte, then element i in the low
// nibble of byte i and i + 16 in the high one), so they run on the same kernels as a GGUF file's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/weight_format.h"
#include "model/safetensors_file.h"

namespace radixserve::model {

struct ConvertedTensor {
  std::string name;  // canonical
  std::string file;  // source, for error messages
  kernels::WeightFormat format = kernels::WeightFormat::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Every layer's experts found in `files` (a layer's tensors may span files). DataLoss naming the
// tensor when shapes disagree or a layer lacks a piece.
Expected<std::vector<ConvertedTensor>> ConvertGptOssExperts(
    const std::vector<SafetensorsFile>& files);

}  // namespace radixserve::model

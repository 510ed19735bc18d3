// Scalar dequantization of ggml block formats (and float formats) to float32.
#pragma once

#include <cstdint>

#include "kernels/weight_format.h"

namespace radixserve::kernels::ref {

// Writes `count` floats decoded from `src` (count must be a multiple of BlockElements(format);
// src holds StorageBytes(format, count) bytes, with no alignment requirement).
void Dequantize(WeightFormat format, const void* src, float* dst, int64_t count);

}  // namespace radixserve::kernels::ref

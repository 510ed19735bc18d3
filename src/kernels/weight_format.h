// WeightFormat: the storage formats a weight matrix may have in memory. Quantized formats keep
// ggml's block layouts byte for byte (so GGUF tensors are used straight from the mapped file);
// kernels dequantize one block at a time while multiplying.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace radixserve::kernels {

enum class WeightFormat : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  // OCP microscaling FP4 (gpt-oss experts): 32 E2M1 values sharing one E8M0 exponent byte.
  kMXFP4,
};

// Elements per block (1 for float formats, 32 for the legacy quants and MXFP4, 256 for K-quants).
int64_t BlockElements(WeightFormat format);
// Bytes per block.
int64_t BlockBytes(WeightFormat format);
std::string_view FormatName(WeightFormat format);

// Bytes taken by `elements` values, or nullopt if `elements` is not a multiple of the block size
// or the byte count would overflow int64.
std::optional<int64_t> StorageBytes(WeightFormat format, int64_t elements);

// ggml's numeric type ids (GGUF tensor infos) to our formats; nullopt for types we do not load.
std::optional<WeightFormat> FormatFromGgmlType(uint32_t ggml_type);

}  // namespace radixserve::kernels

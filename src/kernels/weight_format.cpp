#include "kernels/weight_format.h"

#include <limits>

namespace radixserve::kernels {

int64_t BlockElements(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32:
    case WeightFormat::kF16:
    case WeightFormat::kBF16:
      return 1;
    case WeightFormat::kQ8_0:
    case WeightFormat::kQ4_0:
    case WeightFormat::kQ4_1:
    case WeightFormat::kQ5_0:
    case WeightFormat::kQ5_1:
    case WeightFormat::kMXFP4:
      return 32;
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K:
    case WeightFormat::kQ6_K:
      return 256;
  }
  return 1;
}

int64_t BlockBytes(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32:
      return 4;
    case WeightFormat::kF16:
      return 2;
    case WeightFormat::kBF16:
      return 2;
    case WeightFormat::kQ8_0:
      return 2 + 32;
    case WeightFormat::kQ4_0:
      return 2 + 16;
    case WeightFormat::kQ4_1:
      return 4 + 16;
    case WeightFormat::kQ5_0:
      return 2 + 4 + 16;
    case WeightFormat::kQ5_1:
      return 4 + 4 + 16;
    case WeightFormat::kQ4_K:
      return 4 + 12 + 128;
    case WeightFormat::kQ5_K:
      return 4 + 12 + 32 + 128;
    case WeightFormat::kQ6_K:
      return 128 + 64 + 16 + 2;
    case WeightFormat::kMXFP4:
      return 1 + 16;
  }
  return 1;
}

std::string_view FormatName(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32:
      return "F32";
    case WeightFormat::kF16:
      return "F16";
    case WeightFormat::kBF16:
      return "BF16";
    case WeightFormat::kQ8_0:
      return "Q8_0";
    case WeightFormat::kQ4_0:
      return "Q4_0";
    case WeightFormat::kQ4_1:
      return "Q4_1";
    case WeightFormat::kQ5_0:
      return "Q5_0";
    case WeightFormat::kQ5_1:
      return "Q5_1";
    case WeightFormat::kQ4_K:
      return "Q4_K";
    case WeightFormat::kQ5_K:
      return "Q5_K";
    case WeightFormat::kQ6_K:
      return "Q6_K";
    case WeightFormat::kMXFP4:
      return "MXFP4";
  }
  return "?";
}

std::optional<int64_t> StorageBytes(WeightFormat format, int64_t elements) {
  const int64_t block = BlockElements(format);
  if (elements < 0 || elements % block != 0) return std::nullopt;
  const int64_t blocks = elements / block;
  const int64_t bytes_per_block = BlockBytes(format);
  if (blocks > std::numeric_limits<int64_t>::max() / bytes_per_block) return std::nullopt;
  return blocks * bytes_per_block;
}

std::optional<WeightFormat> FormatFromGgmlType(uint32_t ggml_type) {
  switch (ggml_type) {
    case 0:
      return WeightFormat::kF32;
    case 1:
      return WeightFormat::kF16;
    case 2:
      return WeightFormat::kQ4_0;
    case 3:
      return WeightFormat::kQ4_1;
    case 6:
      return WeightFormat::kQ5_0;
    case 7:
      return WeightFormat::kQ5_1;
    case 8:
      return WeightFormat::kQ8_0;
    case 12:
      return WeightFormat::kQ4_K;
    case 13:
      return WeightFormat::kQ5_K;
    case 14:
      return WeightFormat::kQ6_K;
    case 30:
      return WeightFormat::kBF16;
    case 39:
      return WeightFormat::kMXFP4;
    default:
      return std::nullopt;
  }
}

}  // namespace radixserve::kernels

#include "model/fused_weights.h"

#include <cstring>

#include "common/check.h"

namespace radixserve::model {

std::optional<kernels::WeightMatrix> FusedWeights::Stack(
    const std::vector<kernels::WeightMatrix>& parts) {
  RADIX_CHECK(!parts.empty());
  kernels::WeightMatrix out;
  out.format = parts.front().format;
  out.cols = parts.front().cols;
  for (const kernels::WeightMatrix& p : parts) {
    if (p.format != out.format || p.cols != out.cols) return std::nullopt;
    out.rows += p.rows;
  }
  const int64_t row_bytes = out.row_bytes();
  std::vector<uint8_t>& buffer = buffers_.emplace_back(static_cast<size_t>(out.rows * row_bytes));
  int64_t offset = 0;
  for (const kernels::WeightMatrix& p : parts) {
    const int64_t bytes = p.rows * row_bytes;
    std::memcpy(buffer.data() + offset, p.data, static_cast<size_t>(bytes));
    offset += bytes;
  }
  bytes_ += static_cast<int64_t>(buffer.size());
  out.data = buffer.data();
  return out;
}

}  // namespace radixserve::model

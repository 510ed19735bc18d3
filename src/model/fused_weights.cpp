#include "model/fused_weights.h"

#include <cstring>

#include "common/check.h"
#include "kernels/weight_format.h"

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

bool FusedWeights::Release(const kernels::WeightMatrix& m) {
  for (std::vector<uint8_t>& buffer : buffers_) {
    if (!buffer.empty() && buffer.data() == m.data) {
      bytes_ -= static_cast<int64_t>(buffer.size());
      std::vector<uint8_t>().swap(buffer);
      return true;
    }
  }
  return false;
}

std::optional<kernels::WeightMatrix> FusedWeights::CopyColumns(const kernels::WeightMatrix& m,
                                                               int64_t first, int64_t n,
                                                               std::vector<uint8_t>& buffer) {
  const int64_t block = kernels::BlockElements(m.format);
  RADIX_CHECK(first >= 0 && n > 0 && first + n <= m.cols);
  if (first % block != 0 || n % block != 0) return std::nullopt;
  kernels::WeightMatrix out{m.format, m.rows, n, nullptr};
  const int64_t out_row = out.row_bytes();
  const int64_t skip = first / block * kernels::BlockBytes(m.format);
  buffer.resize(static_cast<size_t>(m.rows * out_row));
  for (int64_t r = 0; r < m.rows; ++r) {
    std::memcpy(buffer.data() + r * out_row, static_cast<const uint8_t*>(m.row(r)) + skip,
                static_cast<size_t>(out_row));
  }
  out.data = buffer.data();
  return out;
}

std::optional<kernels::WeightMatrix> FusedWeights::Columns(const kernels::WeightMatrix& m,
                                                           int64_t first, int64_t n) {
  std::vector<uint8_t> buffer;
  auto out = CopyColumns(m, first, n, buffer);
  if (!out) return std::nullopt;
  bytes_ += static_cast<int64_t>(buffer.size());
  buffers_.push_back(std::move(buffer));  // the moved vector keeps its storage
  return out;
}

Status ColumnShardError(const kernels::WeightMatrix& m, int64_t n, const std::string& name,
                        int ranks) {
  return InvalidArgument("argument --tp-size: " + std::to_string(ranks) + " ranks cannot split " +
                         name + ": a shard of " + std::to_string(n) +
                         " columns does not hold whole " +
                         std::string(kernels::FormatName(m.format)) + " blocks of " +
                         std::to_string(kernels::BlockElements(m.format)));
}

}  // namespace radixserve::model

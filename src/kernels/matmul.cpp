#include "kernels/matmul.h"

#include <cstring>
#include <vector>

#include "common/check.h"
#include "kernels/float_matmul.h"
#include "kernels/half.h"
#include "kernels/quant_matmul.h"
#include "kernels/ref/activation_quant.h"
#include "kernels/ref/dequantize.h"

namespace radixserve::kernels {

int64_t WeightMatrix::row_bytes() const {
  auto bytes = StorageBytes(format, cols);
  RADIX_CHECK(bytes.has_value());
  return *bytes;
}

void DequantizeRow(const WeightMatrix& w, int64_t r, float* out) {
  RADIX_CHECK(r >= 0 && r < w.rows);
  ref::Dequantize(w.format, w.row(r), out, w.cols);
}

void MatMul(const KernelTable& table, ThreadPool* pool, const float* x, int64_t n,
            const WeightMatrix& w, float* y, ActivationMode mode) {
  if (mode == ActivationMode::kGgmlRounded && QuantMatMul(table, pool, x, n, w, y)) return;
  if (IsFloatFormat(w.format)) return FloatMatMul(FloatKernelsFor(table), pool, x, n, w, y, mode);
  const int64_t cols = w.cols;
  std::vector<float> rounded;
  // Q4_1/Q5_1 against Q8_1: per token and block, the float16 block-sum correction (see
  // RoundActivations), multiplied with each weight block's offset m.
  std::vector<float> corrections;
  const int64_t blocks_per_row = cols / 32;
  const bool block_sums = mode == ActivationMode::kGgmlRounded && ref::UsesBlockSums(w.format);
  if (mode == ActivationMode::kGgmlRounded && ref::QuantizesActivations(w.format)) {
    rounded.resize(static_cast<size_t>(n * cols));
    if (block_sums) corrections.resize(static_cast<size_t>(n * blocks_per_row));
    ref::RoundActivations(w.format, x, rounded.data(), n * cols,
                          block_sums ? corrections.data() : nullptr);
    x = rounded.data();
  }
  const int64_t rows = w.rows;
  const int64_t row_bytes = w.row_bytes();
  auto run = [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> buffer;
    if (static_cast<int64_t>(buffer.size()) < cols) buffer.resize(static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      const auto* src = static_cast<const uint8_t*>(w.data) + r * row_bytes;
      const float* weights;
      if (w.format == WeightFormat::kF32) {
        weights = reinterpret_cast<const float*>(src);
      } else {
        ref::Dequantize(w.format, src, buffer.data(), cols);
        weights = buffer.data();
      }
      if (!block_sums) {
        for (int64_t t = 0; t < n; ++t) y[t * rows + r] = table.dot(x + t * cols, weights, cols);
        continue;
      }
      thread_local std::vector<float> offsets;
      offsets.resize(static_cast<size_t>(blocks_per_row));
      const int64_t block_bytes = BlockBytes(w.format);
      for (int64_t b = 0; b < blocks_per_row; ++b) {
        uint16_t m;
        std::memcpy(&m, src + b * block_bytes + 2, 2);
        offsets[static_cast<size_t>(b)] = F16ToF32(m);
      }
      for (int64_t t = 0; t < n; ++t) {
        y[t * rows + r] =
            table.dot(x + t * cols, weights, cols) +
            table.dot(offsets.data(), corrections.data() + t * blocks_per_row, blocks_per_row);
      }
    }
  };
  if (pool == nullptr) {
    run(0, rows);
  } else {
    pool->ParallelFor(rows, 16, run);
  }
}

}  // namespace radixserve::kernels

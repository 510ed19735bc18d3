// MatMul: y[n, rows] = x[n, cols] * W[rows, cols]^T for a weight matrix in any WeightFormat.
// Weights stay in their storage format; each row is dequantized block by block into a per-thread
// buffer and multiplied with every activation row, so the dequantization cost is shared by the
// whole batch. Rows are split across the thread pool (pool may be null: single-threaded).
#pragma once

#include <cstdint>

#include "common/thread_pool.h"
#include "kernels/kernel_table.h"
#include "kernels/weight_format.h"

namespace radixserve::kernels {

// A row-major weight matrix in storage format. row_bytes = StorageBytes(format, cols).
struct WeightMatrix {
  WeightFormat format = WeightFormat::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;

  int64_t row_bytes() const;
  const void* row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes(); }
  // Rows [first, first + n): every format stores its rows independently.
  WeightMatrix Rows(int64_t first, int64_t n) const { return {format, n, cols, row(first)}; }
};

// How activations meet quantized weights.
enum class ActivationMode {
  kExact,       // float32 activations times dequantized weights
  kGgmlRounded  // activations rounded through Q8_0/Q8_1/Q8_K first, as llama.cpp does
};

// x: [n, w.cols] row-major, y: [n, w.rows] row-major (must not alias x). The activation mode
// only matters for block-quantized weights.
void MatMul(const KernelTable& table, ThreadPool* pool, const float* x, int64_t n,
            const WeightMatrix& w, float* y, ActivationMode mode = ActivationMode::kExact);

// Writes row r of w, dequantized, into out[w.cols] (embedding lookup).
void DequantizeRow(const WeightMatrix& w, int64_t r, float* out);

}  // namespace radixserve::kernels

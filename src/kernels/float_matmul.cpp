#include "kernels/float_matmul.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "kernels/half.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels {

namespace x86 {
const FloatGemmKernels& Avx2FloatTable();
const FloatGemmKernels& Avx512FloatTable();
}  // namespace x86

namespace {

float WeightAt(const void* row, WeightFormat format, int64_t c) {
  switch (format) {
    case WeightFormat::kF32:
      return LoadUnaligned<float>(row, c);
    case WeightFormat::kBF16:
      return Bf16ToF32(LoadUnaligned<uint16_t>(row, c));
    case WeightFormat::kF16:
      return F16ToF32(LoadUnaligned<uint16_t>(row, c));
    default:
      RADIX_CHECK_MSG(false, "not a float weight format");
  }
  return 0.0f;
}

void RefGemm(const float* x, int64_t ldx, int64_t n, const void* w, WeightFormat format,
             int64_t w_stride, int64_t cols, int64_t r_begin, int64_t r_end, float* y,
             int64_t ldy) {
  for (int64_t r = r_begin; r < r_end; ++r) {
    const void* row = static_cast<const uint8_t*>(w) + r * w_stride;
    for (int64_t t = 0; t < n; ++t) {
      float sum = 0.0f;
      for (int64_t c = 0; c < cols; ++c) sum += x[t * ldx + c] * WeightAt(row, format, c);
      y[t * ldy + r] = sum;
    }
  }
}

void RefRoundBf16(const float* x, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = Bf16ToF32(F32ToBf16(x[i]));
}

void RefRoundF16(const float* x, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = F16ToF32(F32ToF16(x[i]));
}

void RefToBf16(const float* x, uint16_t* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = F32ToBf16(x[i]);
}

// F32 panels over `rows` rows.
int64_t F32PanelCount(int64_t rows) { return (rows + kF32PanelRows - 1) / kF32PanelRows; }

// The chain every panel kernel computes (float_matmul.h), one output at a time.
void RefGemmF32Panels(const float* x, int64_t ldx, int64_t n, const float* panels, int64_t rows,
                      int64_t cols, int64_t p_begin, int64_t p_end, float* y, int64_t ldy) {
  for (int64_t p = p_begin; p < p_end; ++p) {
    const float* panel = panels + p * kF32PanelRows * cols;
    const int64_t r0 = p * kF32PanelRows, live = std::min(kF32PanelRows, rows - r0);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < live; ++i) {
        float acc = 0.0f;
        for (int64_t c = 0; c < cols; ++c) {
          acc = std::fma(panel[c * kF32PanelRows + i], x[t * ldx + c], acc);
        }
        y[t * ldy + r0 + i] = acc;
      }
    }
  }
}

constexpr FloatGemmKernels kRef{"ref",       RefGemm,   nullptr,         RefRoundBf16,
                                RefRoundF16, RefToBf16, RefGemmF32Panels};

// Tokens per pass over a block of weight rows: 64 rows of activations (<= 400 KB as f32 for the
// widest matrices here) stay in L2 while the rows stream through.
constexpr int64_t kTokenChunk = 64;
constexpr int64_t kRowBlock = 4;
// Rows of one thread's range when the batch spans several token chunks (see FloatMatMul).
constexpr int64_t kWideRows = 192;

// Runs run(b0, b1) over `blocks` blocks of `block_rows` weight rows each for n tokens, split over
// the pool (which may be null). Small ranges balance the two cores; each still covers 16+ rows of
// one weight stream. With many token chunks (prefill, encoders) a range takes ~192 rows instead:
// its weights stay in L2 while every token chunk passes over them, so the activations, not the
// weights, are what streams from memory, and they stream rows/192 times instead of rows/16.
template <class Run>
void OverRowBlocks(ThreadPool* pool, int64_t blocks, int64_t block_rows, int64_t n,
                   const Run& run) {
  if (pool == nullptr || pool->size() == 1 || blocks < 2) {
    run(0, blocks);
    return;
  }
  int64_t grain =
      std::max<int64_t>((16 + block_rows - 1) / block_rows, blocks / (16 * pool->size()));
  if (n > kTokenChunk) grain = std::max<int64_t>(grain, kWideRows / block_rows);
  pool->ParallelFor(blocks, grain, run);
}

}  // namespace

const FloatGemmKernels& RefFloatKernels() { return kRef; }

const FloatGemmKernels* Avx2FloatKernels() {
  return x86::CpuHasAvx2() ? &x86::Avx2FloatTable() : nullptr;
}

const FloatGemmKernels* Avx512FloatKernels() {
  return x86::CpuHasAvx512() ? &x86::Avx512FloatTable() : nullptr;
}

std::vector<const FloatGemmKernels*> AvailableFloatKernels() {
  std::vector<const FloatGemmKernels*> out{&kRef};
  if (const FloatGemmKernels* k = Avx2FloatKernels()) out.push_back(k);
  if (const FloatGemmKernels* k = Avx512FloatKernels()) out.push_back(k);
  return out;
}

const FloatGemmKernels& FloatKernelsFor(const KernelTable& table) {
  if (table.name == "avx512") {
    if (const FloatGemmKernels* k = Avx512FloatKernels()) return *k;
  }
  if (table.name == "avx512" || table.name == "avx2") {
    if (const FloatGemmKernels* k = Avx2FloatKernels()) return *k;
  }
  return kRef;
}

bool IsFloatFormat(WeightFormat format) {
  return format == WeightFormat::kF32 || format == WeightFormat::kBF16 ||
         format == WeightFormat::kF16;
}

void FloatMatMul(const FloatGemmKernels& kernels, ThreadPool* pool, const float* x, int64_t n,
                 const WeightMatrix& w, float* y, ActivationMode mode) {
  RADIX_CHECK(IsFloatFormat(w.format));
  const int64_t rows = w.rows;
  const int64_t cols = w.cols;
  const int64_t stride = w.row_bytes();
  const bool rounded = mode == ActivationMode::kGgmlRounded;
  std::vector<float> rounded_x;
  std::vector<uint16_t> bf16_x;
  const bool dot_bf16 = rounded && w.format == WeightFormat::kBF16 && kernels.gemm_bf16 != nullptr;
  if (dot_bf16) {
    bf16_x.resize(static_cast<size_t>(n * cols));
    kernels.to_bf16(x, bf16_x.data(), n * cols);
  } else if (rounded && w.format != WeightFormat::kF32) {
    rounded_x.resize(static_cast<size_t>(n * cols));
    if (w.format == WeightFormat::kBF16) {
      kernels.round_bf16(x, rounded_x.data(), n * cols);
    } else {
      kernels.round_f16(x, rounded_x.data(), n * cols);
    }
    x = rounded_x.data();
  }
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  auto run = [&](int64_t b0, int64_t b1) {
    const int64_t r0 = b0 * kRowBlock;
    const int64_t r1 = std::min(rows, b1 * kRowBlock);
    for (int64_t t0 = 0; t0 < n; t0 += kTokenChunk) {
      const int64_t nt = std::min(kTokenChunk, n - t0);
      if (dot_bf16) {
        kernels.gemm_bf16(bf16_x.data() + t0 * cols, cols, nt, static_cast<const uint16_t*>(w.data),
                          stride / 2, cols, r0, r1, y + t0 * rows, rows);
      } else {
        kernels.gemm(x + t0 * cols, cols, nt, w.data, w.format, stride, cols, r0, r1, y + t0 * rows,
                     rows);
      }
    }
  };
  OverRowBlocks(pool, blocks, kRowBlock, n, run);
}

int64_t F32PanelFloats(int64_t rows, int64_t cols) {
  return F32PanelCount(rows) * kF32PanelRows * cols;
}

void PackF32Panels(const float* w, int64_t ld, int64_t rows, int64_t cols, bool transposed,
                   float* panels) {
  for (int64_t p = 0; p < F32PanelCount(rows); ++p) {
    float* panel = panels + p * kF32PanelRows * cols;
    const int64_t r0 = p * kF32PanelRows, live = std::min(kF32PanelRows, rows - r0);
    for (int64_t c = 0; c < cols; ++c) {
      float* column = panel + c * kF32PanelRows;
      for (int64_t i = 0; i < live; ++i) {
        column[i] = transposed ? w[c * ld + r0 + i] : w[(r0 + i) * ld + c];
      }
      std::fill(column + live, column + kF32PanelRows, 0.0f);
    }
  }
}

void F32PanelMatMul(const FloatGemmKernels& kernels, ThreadPool* pool, const float* x, int64_t ldx,
                    int64_t n, const float* panels, int64_t rows, int64_t cols, float* y,
                    int64_t ldy) {
  RADIX_CHECK(kernels.gemm_f32_panels != nullptr);
  const auto gemm = kernels.gemm_f32_panels;
  auto run = [&](int64_t p0, int64_t p1) {
    for (int64_t t0 = 0; t0 < n; t0 += kTokenChunk) {
      const int64_t nt = std::min(kTokenChunk, n - t0);
      gemm(x + t0 * ldx, ldx, nt, panels, rows, cols, p0, p1, y + t0 * ldy, ldy);
    }
  };
  OverRowBlocks(pool, F32PanelCount(rows), kF32PanelRows, n, run);
}

}  // namespace radixserve::kernels

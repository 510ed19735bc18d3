// FloatMatMul: y[n, rows] = x[n, cols] * W[rows, cols]^T for weights stored as F32, BF16 or F16.
//
// Numerics follow llama.cpp's CPU matmul for these formats when the activation mode is
// kGgmlRounded: activations are rounded to bf16 (BF16 weights) or f16 (F16 weights) first, then
// every product is formed exactly in f32 and summed in f32. Under kExact activations stay f32 and
// only the weights are widened. F32 weights ignore the mode.
//
// Determinism: y[t, r] is a function of x row t and weight row r only. Its summation order does
// not depend on n, on which other rows or tokens share a register tile, nor on the thread count,
// so batching and parallelism never change a result bit (--enable-deterministic-inference).
//
// Work split: rows in blocks of 4 over the ThreadPool (pool may be null); inside a block, tokens
// in chunks that keep the activations in L2, and 4x4 register tiles (4 weight rows x 4 tokens),
// so a decode step reads each weight row from memory once for the whole batch.
//
// F32 weights packed at load (kernels::Pack, an encoder's projections, attention's K and V per
// head) run through F32PanelMatMul below instead: broadcast tiles with no lane reductions, ~1.5x
// the rows-as-stored GEMM at prefill on AVX-512 (float_kernels_bench gemm).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"

namespace radixserve::kernels {

// Per-instruction-set kernels. All pointers need no alignment; counts may be any size.
struct FloatGemmKernels {
  std::string_view name;  // "ref", "avx2", "avx512"
  // y[t * ldy + r] = sum_c x[t * ldx + c] * w_r[c] for t in [0, n), r in [r_begin, r_end), where
  // w_r = w + r * w_stride bytes holds `cols` elements of `format` (kF32, kBF16 or kF16).
  void (*gemm)(const float* x, int64_t ldx, int64_t n, const void* w, WeightFormat format,
               int64_t w_stride, int64_t cols, int64_t r_begin, int64_t r_end, float* y,
               int64_t ldy);
  // The same for bf16 activations and bf16 weights (strides in elements), products summed in
  // f32 with AVX512-BF16 dot products. nullptr when the CPU lacks that extension.
  void (*gemm_bf16)(const uint16_t* x, int64_t ldx, int64_t n, const uint16_t* w, int64_t w_stride,
                    int64_t cols, int64_t r_begin, int64_t r_end, float* y, int64_t ldy);
  // out[i] = x[i] rounded to the nearest bf16 / f16 (ties to even), kept as f32. out may alias x.
  void (*round_bf16)(const float* x, float* out, int64_t count);
  void (*round_f16)(const float* x, float* out, int64_t count);
  // out[i] = bf16 bits of x[i] (nearest, ties to even).
  void (*to_bf16)(const float* x, uint16_t* out, int64_t count);
  // y[t * ldy + r] for t < n and the rows r < rows of F32 panels [p_begin, p_end) (the layout
  // below): the fma chain of F32PanelMatMul.
  void (*gemm_f32_panels)(const float* x, int64_t ldx, int64_t n, const float* panels, int64_t rows,
                          int64_t cols, int64_t p_begin, int64_t p_end, float* y, int64_t ldy);
};

const FloatGemmKernels& RefFloatKernels();
// nullptr when the CPU lacks AVX2+FMA+F16C, resp. AVX-512 F/BW/VL with F16C.
const FloatGemmKernels* Avx2FloatKernels();
const FloatGemmKernels* Avx512FloatKernels();
// Every variant this CPU can run, ref first.
std::vector<const FloatGemmKernels*> AvailableFloatKernels();
// The variant matching a KernelTable's instruction set (so RADIX_KERNELS also selects these).
const FloatGemmKernels& FloatKernelsFor(const KernelTable& table);

bool IsFloatFormat(WeightFormat format);

// x: [n, w.cols], y: [n, w.rows] (no aliasing); w.format must be a float format.
void FloatMatMul(const FloatGemmKernels& kernels, ThreadPool* pool, const float* x, int64_t n,
                 const WeightMatrix& w, float* y, ActivationMode mode);

// F32 weights packed for the broadcast GEMM (prefill and encoders: a register tile of 4 panels x
// 6 tokens takes 4 weight loads and 6 broadcasts per 24 fmas, and no reductions). Panel p holds
// rows [16p, 16p + 16), column after column: 16 floats per column, rows past the end zero.
// Numerics: y[t, r] is the f32 fma chain over the columns in order, acc = fma(W[r, c], x[t, c],
// acc) from acc = 0, bit for bit whatever n, the tile it falls in or the thread count
// (--enable-deterministic-inference holds).
inline constexpr int64_t kF32PanelRows = 16;
int64_t F32PanelFloats(int64_t rows, int64_t cols);
// Packs W[r, c] = w[r * ld + c] (transposed: w[c * ld + r]) for r < rows, c < cols.
void PackF32Panels(const float* w, int64_t ld, int64_t rows, int64_t cols, bool transposed,
                   float* panels);
// y[t * ldy + r] = sum_c x[t * ldx + c] W[r, c] for t < n, r < rows (no aliasing); pool may be
// null.
void F32PanelMatMul(const FloatGemmKernels& kernels, ThreadPool* pool, const float* x, int64_t ldx,
                    int64_t n, const float* panels, int64_t rows, int64_t cols, float* y,
                    int64_t ldy);

}  // namespace radixserve::kernels

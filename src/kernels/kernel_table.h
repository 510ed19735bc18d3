// KernelTable: the vector primitives every composite op (matmul, attention, norms, gating) is
// built from, in one variant per instruction set. `ref` is plain scalar C++ and the test oracle
// for every other variant; `avx2` and `avx512` use function-level target attributes, so one binary
// runs on any x86-64 CPU and picks the best variant at run time from CPUID.
//
// ActiveKernels() chooses once per process: RADIX_KERNELS=ref|avx2|avx512 forces a variant (an
// unavailable one falls back to ref with a warning); otherwise the best the CPU supports.
// All pointers need no alignment; n may be any size including 0. Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace radixserve::kernels {

// The sampler's rows are cut into blocks of this many logits; exp_blocks reports a sum and a
// largest value per block, so later passes can skip blocks and find a cumulative mass by block.
inline constexpr int64_t kExpBlock = 256;

struct KernelTable {
  std::string_view name;
  // sum_i a[i] * b[i]
  float (*dot)(const float* a, const float* b, int64_t n);
  // y[i] += alpha * x[i]
  void (*axpy)(float alpha, const float* x, float* y, int64_t n);
  // y = x / sqrt(mean(x^2) + eps) * (weight_offset + w); y may alias x.
  void (*rms_norm)(const float* x, const float* w, float weight_offset, float eps, float* y,
                   int64_t n);
  // In place: x = exp(x - max) / sum.
  void (*softmax)(float* x, int64_t n);
  // out = silu(gate) * up; out may alias gate or up.
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  // out = gelu_tanh(gate) * up; out may alias gate or up.
  void (*gelu_tanh_mul)(const float* gate, const float* up, float* out, int64_t n);
  // out = gelu(x) = x/2 * (1 + erf(x / sqrt 2)), the exact (erf) form; out may alias x. SIMD
  // variants use Abramowitz & Stegun 7.1.26 (|error of erf| < 2e-7).
  void (*gelu_erf)(const float* x, float* out, int64_t n);
  // dot / axpy over a 16-bit vector h (IEEE half, or bfloat16), converted to float on the fly and
  // summed exactly as dot / axpy sum the converted floats (16-bit LoRA matrices kept in 16 bits).
  float (*dot_f16)(const uint16_t* h, const float* b, int64_t n);
  float (*dot_bf16)(const uint16_t* h, const float* b, int64_t n);
  void (*axpy_f16)(float alpha, const uint16_t* h, float* y, int64_t n);
  void (*axpy_bf16)(float alpha, const uint16_t* h, float* y, int64_t n);
  // The sampler's passes over a row of logits (one vocabulary).
  // Index of the largest of x[0, n), the lowest on ties; NaN never wins; -1 when there is none.
  int64_t (*argmax)(const float* x, int64_t n);
  // out[i] = exp(x[i] * scale - shift), exactly 0 where that exponent is below -87 or NaN (so
  // -inf, a masked logit, gives 0). For each block b of kExpBlock outputs (the last may be
  // shorter): block_sum[b] = their float sum, in an order the variant chooses, and block_max[b]
  // = their largest (0 for a block of zeros).
  void (*exp_blocks)(const float* x, float scale, float shift, float* out, float* block_sum,
                     float* block_max, int64_t n);
  // The float sum of the x[i] >= tau, in an order the variant chooses; *count = how many.
  float (*sum_at_least)(const float* x, int64_t n, float tau, int64_t* count);
  // Writes first + i for every x[i] >= tau to ids, in increasing i; returns how many.
  int64_t (*gather_at_least)(const float* x, int64_t n, float tau, int32_t first, int32_t* ids);
};

const KernelTable& RefKernels();
// nullptr when the CPU lacks the instruction set.
const KernelTable* Avx2Kernels();
const KernelTable* Avx512Kernels();

// Every variant this CPU can run, ref first.
std::vector<const KernelTable*> AvailableKernels();

const KernelTable& ActiveKernels();

}  // namespace radixserve::kernels

// Scalar reference of the KernelTable primitives. Written for clarity, not speed: every SIMD
// variant is tested against these.
#include <algorithm>
#include <cmath>

#include "kernels/half.h"
#include "kernels/kernel_table.h"

namespace radixserve::kernels {
namespace {

float Dot(const float* a, const float* b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(sum);
}

void Axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

template <float (*Convert)(uint16_t)>
float DotHalf(const uint16_t* h, const float* b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(Convert(h[i])) * b[i];
  return static_cast<float>(sum);
}

template <float (*Convert)(uint16_t)>
void AxpyHalf(float alpha, const uint16_t* h, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * Convert(h[i]);
}

void RmsNorm(const float* x, const float* w, float weight_offset, float eps, float* y, int64_t n) {
  double sum = 0.0;
  // f32 squares summed in f64, as llama.cpp's rms_norm does.
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float inv = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv * (weight_offset + w[i]);
}

void Softmax(float* x, int64_t n) {
  if (n == 0) return;
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = std::fmax(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float inner = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    out[i] = 0.5f * g * (1.0f + std::tanh(inner)) * up[i];
  }
}

void GeluErf(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(0.5 * x[i] * (1.0 + std::erf(x[i] * 0.70710678118654752440)));
  }
}

int64_t Argmax(const float* x, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] == x[i] && (best < 0 || x[i] > x[best])) best = i;
  }
  return best;
}

void ExpBlocks(const float* x, float scale, float shift, float* out, float* block_sum,
               float* block_max, int64_t n) {
  for (int64_t begin = 0; begin < n; begin += kExpBlock) {
    const int64_t end = std::min(n, begin + kExpBlock);
    double sum = 0.0;
    float max = 0.0f;
    for (int64_t i = begin; i < end; ++i) {
      const float v = x[i] * scale - shift;
      out[i] = v >= -87.0f ? std::exp(v) : 0.0f;
      sum += out[i];
      max = std::max(max, out[i]);
    }
    block_sum[begin / kExpBlock] = static_cast<float>(sum);
    block_max[begin / kExpBlock] = max;
  }
}

float SumAtLeast(const float* x, int64_t n, float tau, int64_t* count) {
  double sum = 0.0;
  *count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] >= tau) {
      sum += x[i];
      ++*count;
    }
  }
  return static_cast<float>(sum);
}

int64_t GatherAtLeast(const float* x, int64_t n, float tau, int32_t first, int32_t* ids) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] >= tau) ids[count++] = first + static_cast<int32_t>(i);
  }
  return count;
}

}  // namespace

const KernelTable& RefKernels() {
  static const KernelTable table{"ref",
                                 Dot,
                                 Axpy,
                                 RmsNorm,
                                 Softmax,
                                 SiluMul,
                                 GeluTanhMul,
                                 GeluErf,
                                 DotHalf<F16ToF32>,
                                 DotHalf<Bf16ToF32>,
                                 AxpyHalf<F16ToF32>,
                                 AxpyHalf<Bf16ToF32>,
                                 Argmax,
                                 ExpBlocks,
                                 SumAtLeast,
                                 GatherAtLeast};
  return table;
}

}  // namespace radixserve::kernels

#include "kernels/ref/activation_quant.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "kernels/half.h"

namespace radixserve::kernels::ref {
namespace {

// Q8_0 / Q8_1: blocks of 32, scale amax / 127 stored as float16, round to nearest.
// Returns the float16-rounded block sum d * sum(q) (Q8_1's s).
float RoundQ8_32(const float* x, float* out) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  const float d16 = F16ToF32(F32ToF16(d));
  int sum = 0;
  for (int i = 0; i < 32; ++i) {
    const float q = std::nearbyint(x[i] * id);
    sum += static_cast<int>(q);
    out[i] = d16 * q;
  }
  return F16ToF32(F32ToF16(d * static_cast<float>(sum)));
}

// Q8_K: blocks of 256; the element of largest magnitude maps to -127 and the float32 scale is
// kept exactly; values are clamped to 127.
void RoundQ8_K(const float* x, float* out) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < 256; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax == 0.0f) {
    std::fill(out, out + 256, 0.0f);
    return;
  }
  const float iscale = -127.0f / max;
  const float d = 1.0f / iscale;
  for (int i = 0; i < 256; ++i) {
    const int q = std::min(127, static_cast<int>(std::nearbyint(iscale * x[i])));
    out[i] = d * static_cast<float>(q);
  }
}

}  // namespace

bool QuantizesActivations(WeightFormat weight) {
  switch (weight) {
    case WeightFormat::kF32:
    case WeightFormat::kF16:
    case WeightFormat::kBF16:
      return false;
    default:
      return true;
  }
}

bool UsesBlockSums(WeightFormat weight) {
  return weight == WeightFormat::kQ4_1 || weight == WeightFormat::kQ5_1;
}

void RoundActivations(WeightFormat weight, const float* x, float* out, int64_t count,
                      float* sum_correction) {
  const int64_t block = BlockElements(weight);
  RADIX_CHECK(QuantizesActivations(weight) && count % block == 0);
  for (int64_t b = 0; b < count; b += block) {
    if (block == 256) {
      RoundQ8_K(x + b, out + b);
      continue;
    }
    const float s = RoundQ8_32(x + b, out + b);
    if (sum_correction != nullptr) {
      double sum = 0.0;
      for (int i = 0; i < 32; ++i) sum += out[b + i];
      sum_correction[b / 32] = s - static_cast<float>(sum);
    }
  }
}

}  // namespace radixserve::kernels::ref

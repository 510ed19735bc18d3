#include "kernels/ref/activation_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "kernels/half.h"

namespace radixserve::kernels::ref {
namespace {

// nearbyint under the default rounding mode (ties to even) for |v| < 2^22, without a libm call:
// adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits.
int RoundToInt(float v) {
  float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007FFFFF) - 0x00400000;
}

// One 32-block of Q8_0 / Q8_1: scale amax / 127, round to nearest (ties to even). Returns sum(q);
// *d is the float16-rounded scale and *s the float16-rounded d * sum(q) with the unrounded d.
int QuantizeQ8_32(const float* x, int8_t* q, float* d, float* s) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = amax / 127.0f;
  const float inverse = amax != 0.0f ? 127.0f / amax : 0.0f;
  int sum = 0;
  for (int i = 0; i < 32; ++i) {
    const int v = RoundToInt(x[i] * inverse);
    q[i] = static_cast<int8_t>(v);
    sum += v;
  }
  *d = F16ToF32(F32ToF16(scale));
  *s = F16ToF32(F32ToF16(scale * static_cast<float>(sum)));
  return sum;
}

// One 256-block of Q8_K: the element of largest magnitude maps to -127, values are clamped to
// 127; returns the float32 scale.
float QuantizeQ8_K(const float* x, int8_t* q) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < 256; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax == 0.0f) {
    std::fill(q, q + 256, int8_t{0});
    return 0.0f;
  }
  const float iscale = -127.0f / max;
  for (int i = 0; i < 256; ++i)
    q[i] = static_cast<int8_t>(std::min(127, RoundToInt(iscale * x[i])));
  return 1.0f / iscale;
}

// Q8_0 / Q8_1 rounding in float: the quantized block times its float16 scale. Returns the
// float16-rounded block sum d * sum(q) (Q8_1's s).
float RoundQ8_32(const float* x, float* out) {
  int8_t q[32];
  float d, s;
  QuantizeQ8_32(x, q, &d, &s);
  for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(q[i]);
  return s;
}

// Q8_K rounding in float: the quantized 256-block times its float32 scale.
void RoundQ8_K(const float* x, float* out) {
  int8_t q[256];
  const float d = QuantizeQ8_K(x, q);
  for (int i = 0; i < 256; ++i) out[i] = d * static_cast<float>(q[i]);
}

}  // namespace

int64_t SubBlockElements(WeightFormat weight) { return weight == WeightFormat::kQ6_K ? 16 : 32; }

void ResizeQuantizedActivations(WeightFormat weight, int64_t n, int64_t cols,
                                QuantizedActivations* out) {
  RADIX_CHECK(QuantizesActivations(weight) && cols % BlockElements(weight) == 0);
  out->n = n;
  out->cols = cols;
  out->sub = SubBlockElements(weight);
  out->subs = cols / out->sub;
  const auto elements = static_cast<size_t>(n * cols);
  const auto groups = static_cast<size_t>(n * out->subs);
  if (out->q.size() < elements) out->q.resize(elements);
  if (out->d.size() < groups) {
    out->d.resize(groups);
    out->s.resize(groups);
    out->bias.resize(groups);
    out->sums.resize(groups);
  }
}

void QuantizeActivationRows(WeightFormat weight, int32_t weight_offset, const float* x,
                            int64_t begin, int64_t end, QuantizedActivations* out) {
  const int64_t cols = out->cols, sub = out->sub, subs = out->subs;
  const bool k_quant = BlockElements(weight) == 256;
  for (int64_t t = begin; t < end; ++t) {
    const float* row = x + t * cols;
    int8_t* q = out->q.data() + t * cols;
    float* d = out->d.data() + t * subs;
    float* s = out->s.data() + t * subs;
    int32_t* bias = out->bias.data() + t * subs;
    int16_t* sums = out->sums.data() + t * subs;
    if (!k_quant) {
      for (int64_t b = 0; b < subs; ++b) {
        const int sum = QuantizeQ8_32(row + b * 32, q + b * 32, &d[b], &s[b]);
        if (!UsesBlockSums(weight)) s[b] = 0.0f;
        bias[b] = -weight_offset * sum;
        sums[b] = static_cast<int16_t>(sum);
      }
      continue;
    }
    for (int64_t b = 0; b < cols; b += 256) {
      const float scale = QuantizeQ8_K(row + b, q + b);
      for (int64_t g = b / sub; g < (b + 256) / sub; ++g) {
        int sum = 0;
        for (int64_t i = 0; i < sub; ++i) sum += q[g * sub + i];
        d[g] = scale;
        s[g] = scale * static_cast<float>(sum);
        bias[g] = -weight_offset * sum;
        sums[g] = static_cast<int16_t>(sum);
      }
    }
  }
}

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

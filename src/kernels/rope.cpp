#include "kernels/rope.h"

#include <cmath>

#include "common/check.h"

namespace radixserve::kernels {

std::vector<float> RopeInvFreq(double theta, int rotary_dim, const RopeScaling& scaling,
                               const float* freq_factors) {
  RADIX_CHECK(rotary_dim > 0 && rotary_dim % 2 == 0);
  const int half = rotary_dim / 2;
  std::vector<float> out(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    // float32 like HF's inv_freq, then scaled in double.
    double f = static_cast<float>(1.0 / std::pow(theta, (2.0 * i) / rotary_dim));
    switch (scaling.type) {
      case RopeScalingType::kNone:
        break;
      case RopeScalingType::kLinear:
        f /= scaling.factor;
        break;
      case RopeScalingType::kLlama3: {
        const double old = static_cast<double>(scaling.original_max_position);
        const double low_wavelen = old / scaling.low_freq_factor;
        const double high_wavelen = old / scaling.high_freq_factor;
        const double wavelen = 2.0 * M_PI / f;
        if (wavelen > low_wavelen) {
          f /= scaling.factor;
        } else if (wavelen >= high_wavelen) {
          const double smooth = (old / wavelen - scaling.low_freq_factor) /
                                (scaling.high_freq_factor - scaling.low_freq_factor);
          f = (1.0 - smooth) * f / scaling.factor + smooth * f;
        }
        break;
      }
    }
    if (freq_factors != nullptr) f /= freq_factors[i];
    out[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return out;
}

void ApplyRope(float* x, int heads, int head_dim, int rotary_dim, int64_t position,
               const std::vector<float>& inv_freq, RopeLayout layout) {
  const int half = rotary_dim / 2;
  RADIX_CHECK(static_cast<int>(inv_freq.size()) == half && rotary_dim <= head_dim);
  thread_local std::vector<float> cos_table, sin_table;
  cos_table.resize(static_cast<size_t>(half));
  sin_table.resize(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    const float angle = static_cast<float>(position) * inv_freq[static_cast<size_t>(i)];
    cos_table[static_cast<size_t>(i)] = std::cos(angle);
    sin_table[static_cast<size_t>(i)] = std::sin(angle);
  }
  for (int h = 0; h < heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const int a = layout == RopeLayout::kRotateHalf ? i : 2 * i;
      const int b = layout == RopeLayout::kRotateHalf ? i + half : 2 * i + 1;
      const float c = cos_table[static_cast<size_t>(i)], s = sin_table[static_cast<size_t>(i)];
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

}  // namespace radixserve::kernels

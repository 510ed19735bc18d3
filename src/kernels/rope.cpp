#include "kernels/rope.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace radixserve::kernels {
namespace {

// HF's yarn helpers: the dimension whose wavelength makes `rotations` turns over the original
// context, and the mscale term.
double YarnCorrectionDim(double rotations, int dim, double theta, double original_max) {
  return dim * std::log(original_max / (rotations * 2.0 * M_PI)) / (2.0 * std::log(theta));
}

double YarnMscale(double factor, double mscale) {
  return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

// Yarn blends interpolated (f / factor) and extrapolated (f) frequencies with a linear ramp over
// the dimension range [low, high] derived from beta_fast / beta_slow.
void ApplyYarn(double theta, int rotary_dim, const RopeScaling& s, std::vector<float>* inv_freq) {
  const double original = static_cast<double>(s.original_max_position);
  double low = YarnCorrectionDim(s.beta_fast, rotary_dim, theta, original);
  double high = YarnCorrectionDim(s.beta_slow, rotary_dim, theta, original);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rotary_dim - 1));
  if (low == high) high += 0.001;
  const float factor = static_cast<float>(s.factor);
  for (size_t i = 0; i < inv_freq->size(); ++i) {
    // float32 throughout, as HF computes it.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    const float pos_freq = static_cast<float>(std::pow(theta, static_cast<double>(exponent)));
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (factor * pos_freq);
    const float ramp = std::clamp(
        (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low), 0.0f,
        1.0f);
    const float keep = 1.0f - ramp;  // share of the extrapolated frequency
    (*inv_freq)[i] = interpolation * (1.0f - keep) + extrapolation * keep;
  }
}

}  // namespace

double RopeAttentionFactor(const RopeScaling& s) {
  if (s.type != RopeScalingType::kYarn) return 1.0;
  if (s.attention_factor > 0) return s.attention_factor;
  if (s.mscale != 0 && s.mscale_all_dim != 0) {
    return YarnMscale(s.factor, s.mscale) / YarnMscale(s.factor, s.mscale_all_dim);
  }
  return YarnMscale(s.factor, 1.0);
}

void RopeTable(const int64_t* positions, int64_t rows, const std::vector<float>& inv_freq,
               float scale, float* cos_out, float* sin_out) {
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float pos = static_cast<float>(positions[r]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[static_cast<size_t>(i)];
      cos_out[r * half + i] = std::cos(angle) * scale;
      sin_out[r * half + i] = std::sin(angle) * scale;
    }
  }
}

void ApplyRopeRows(float* x, int64_t rows, int64_t row_stride, int heads, int head_dim,
                   int rotary_dim, const float* cos_table, const float* sin_table,
                   RopeLayout layout) {
  RADIX_CHECK(rotary_dim % 2 == 0 && rotary_dim <= head_dim);
  const int half = rotary_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const float* cs = cos_table + r * half;
    const float* sn = sin_table + r * half;
    for (int h = 0; h < heads; ++h) {
      float* v = x + r * row_stride + static_cast<int64_t>(h) * head_dim;
      if (layout == RopeLayout::kRotateHalf) {
        float* lo = v;
        float* hi = v + half;
        for (int i = 0; i < half; ++i) {
          const float x0 = lo[i], x1 = hi[i];
          lo[i] = x0 * cs[i] - x1 * sn[i];
          hi[i] = x0 * sn[i] + x1 * cs[i];
        }
      } else {
        for (int i = 0; i < half; ++i) {
          const float x0 = v[2 * i], x1 = v[2 * i + 1];
          v[2 * i] = x0 * cs[i] - x1 * sn[i];
          v[2 * i + 1] = x0 * sn[i] + x1 * cs[i];
        }
      }
    }
  }
}

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
      case RopeScalingType::kYarn:  // applied below over the whole vector
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
    if (freq_factors != nullptr && scaling.type != RopeScalingType::kYarn) f /= freq_factors[i];
    out[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  if (scaling.type != RopeScalingType::kYarn) return out;
  ApplyYarn(theta, rotary_dim, scaling, &out);
  if (freq_factors != nullptr) {
    for (int i = 0; i < half; ++i) out[static_cast<size_t>(i)] /= freq_factors[i];
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

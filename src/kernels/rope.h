// Rotary position embedding. Two layouts of the rotated pairs within a head:
//   kRotateHalf  - HF / NeoX: element i pairs with i + rotary_dim/2.
//   kInterleaved - Meta / GGUF llama: element 2i pairs with 2i + 1.
// Both rotate pair i by angle position * inv_freq[i]. A checkpoint whose Q/K rows were permuted
// between the layouts gives identical attention scores under the matching layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace radixserve::kernels {

enum class RopeLayout { kRotateHalf, kInterleaved };

enum class RopeScalingType { kNone, kLinear, kLlama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;          // llama3
  double high_freq_factor = 4.0;         // llama3
  int64_t original_max_position = 8192;  // llama3
};

// Inverse frequencies theta^(-2i/rotary_dim), i < rotary_dim/2, with the scaling applied.
// freq_factors (optional, size rotary_dim/2) divide the frequencies (GGUF rope_freqs tensor).
std::vector<float> RopeInvFreq(double theta, int rotary_dim, const RopeScaling& scaling,
                               const float* freq_factors = nullptr);

// Rotates the first rotary_dim elements of each of `heads` vectors of head_dim floats in place.
void ApplyRope(float* x, int heads, int head_dim, int rotary_dim, int64_t position,
               const std::vector<float>& inv_freq, RopeLayout layout);

}  // namespace radixserve::kernels

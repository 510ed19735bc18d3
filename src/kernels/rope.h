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

enum class RopeScalingType { kNone, kLinear, kLlama3, kYarn };

// The scaling fields follow HF's rope_scaling (rope_parameters) keys of the same names.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;          // llama3
  double high_freq_factor = 4.0;         // llama3
  int64_t original_max_position = 8192;  // llama3, yarn
  double beta_fast = 32.0;               // yarn: rotations where extrapolation ends
  double beta_slow = 1.0;                // yarn: rotations where interpolation starts
  double mscale = 0.0;                   // yarn: 0 = absent
  double mscale_all_dim = 0.0;           // yarn: 0 = absent
  double attention_factor = 0.0;         // yarn: 0 = derive from factor / mscale (HF's rule)
  bool truncate = true;                  // yarn: round the correction range outward
};

// Inverse frequencies theta^(-2i/rotary_dim), i < rotary_dim/2, with the scaling applied.
// freq_factors (optional, size rotary_dim/2) divide the frequencies (GGUF rope_freqs tensor).
std::vector<float> RopeInvFreq(double theta, int rotary_dim, const RopeScaling& scaling,
                               const float* freq_factors = nullptr);

// The factor HF multiplies cos and sin with ("attention_scaling"): 1 except for yarn, where it
// is attention_factor if given, else 0.1 * ln(factor) + 1 (or the mscale / mscale_all_dim ratio
// of that expression when both are given). Q and K both carry it, so scores scale by its square.
double RopeAttentionFactor(const RopeScaling& scaling);

// Rotation table of `rows` tokens: cos/sin[r * half + i] = cos/sin(positions[r] * inv_freq[i])
// times `scale` (RopeAttentionFactor). Computed once per forward step and reused by every layer.
void RopeTable(const int64_t* positions, int64_t rows, const std::vector<float>& inv_freq,
               float scale, float* cos_out, float* sin_out);

// Rotates `heads` vectors of head_dim floats at the start of each of `rows` rows (row r starts
// at x + r * row_stride) with row r of a RopeTable (half = rotary_dim / 2 entries per row).
void ApplyRopeRows(float* x, int64_t rows, int64_t row_stride, int heads, int head_dim,
                   int rotary_dim, const float* cos_table, const float* sin_table,
                   RopeLayout layout);

// Rotates the first rotary_dim elements of each of `heads` vectors of head_dim floats in place.
void ApplyRope(float* x, int heads, int head_dim, int rotary_dim, int64_t position,
               const std::vector<float>& inv_freq, RopeLayout layout);

}  // namespace radixserve::kernels

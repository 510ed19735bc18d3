// GELU (tanh form) gating evaluated the way llama.cpp's CPU backend evaluates it: the input is
// rounded to f16 and looked up in a 65,536-entry table of GELU values rounded to f16, with the
// table bypassed outside [-10, 10] (0 below, the identity above).
//
// This is what GGUF checkpoints run under ActivationMode::kGgmlRounded, so Gemma's GeGLU sees the
// same activations llama.cpp does; it differs from the f32 formula by up to ~5e-4 relative.
#pragma once

#include <cstdint>

namespace radixserve::kernels {

// out[i] = gelu_f16(gate[i]) * up[i]; out may alias gate or up.
void GeluTanhF16TableMul(const float* gate, const float* up, float* out, int64_t n);

// The table's value for one input (f16-rounded GELU, as f32): exposed for tests.
float GeluTanhF16(float x);

}  // namespace radixserve::kernels

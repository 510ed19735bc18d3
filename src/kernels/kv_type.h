// KvType: the element type of the K/V cache buffers, the one vocabulary of the kernels (attention
// gathers and stores), the KV pool (kv::KvDtype is this type) and the model's cache views.
// Pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace radixserve::kernels {

enum class KvType : uint8_t { kF32, kBF16, kF16, kFp8E4M3, kFp8E5M2 };

// Bytes per element: 4 for f32, 2 for bf16 and fp16, 1 for the fp8 formats.
size_t KvTypeSize(KvType type);
bool IsFp8(KvType type);

}  // namespace radixserve::kernels

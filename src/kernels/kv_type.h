// KvType: the element type of the K/V cache buffers, the one vocabulary of the kernels (attention
// gathers and stores), the KV pool (kv::KvDtype is this type) and the model's cache views.
// Pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/check.h"

namespace radixserve::kernels {

// kInt8: symmetric int8 with one scale per token per KV head (LightLLM's int8kv layout): each
// head of a slot is head_dim codes c followed by the f32 scale s (unaligned), value = c * s, with
// s = max |x| / 127 over that head's values. A row stays self-contained, so code that copies rows
// as bytes (prefix cache tiers, KV transfer) carries the scales along.
enum class KvType : uint8_t { kF32, kBF16, kF16, kFp8E4M3, kFp8E5M2, kInt8 };

// Bytes per element: 4 for f32, 2 for bf16 and fp16, 1 for the fp8 formats and int8. Inline
// (and constexpr), so kernel loops that fetch rows keep their registers.
constexpr size_t KvTypeSize(KvType type) {
  switch (type) {
    case KvType::kF32:
      return 4;
    case KvType::kBF16:
    case KvType::kF16:
      return 2;
    case KvType::kFp8E4M3:
    case KvType::kFp8E5M2:
    case KvType::kInt8:
      return 1;
  }
  RADIX_CHECK_MSG(false, "unknown KvType");
}
bool IsFp8(KvType type);

// Elements (of KvTypeSize bytes) one KV head of one slot occupies: head_dim, plus the 4 bytes
// of its scale for kInt8.
inline int64_t KvHeadElements(KvType type, int64_t head_dim) {
  return type == KvType::kInt8 ? head_dim + 4 : head_dim;
}
// kInt8: writes one head (count codes, then its scale) at dst; the reading side is
// Int8HeadScale. Scalar: every instruction set stores through it, so codes never depend on it.
void StoreInt8Head(const float* src, int64_t count, void* dst);
// The scale stored after a head's `head_dim` codes.
inline float Int8HeadScale(const int8_t* codes, int64_t head_dim) {
  float s;
  std::memcpy(&s, codes + head_dim, sizeof(s));
  return s;
}

// Bytes of one slot's row (all KV heads) in one layer's K or V buffer.
inline size_t KvRowBytes(KvType type, int64_t kv_heads, int64_t head_dim) {
  return static_cast<size_t>(kv_heads * KvHeadElements(type, head_dim)) * KvTypeSize(type);
}

// How a row's kv_heads * head_dim f32 values are converted to and from `type`: `count` runs of
// `values` values each, the run i's bytes starting at i * `bytes` in the row. int8 goes head by
// head (each head carries its own scale); the other types convert the whole row at once.
struct KvRowRuns {
  int64_t count = 1;
  int64_t values = 0;
  size_t bytes = 0;
};
inline KvRowRuns KvRowRunsOf(KvType type, int64_t kv_heads, int64_t head_dim) {
  const int64_t count = type == KvType::kInt8 && kv_heads > 0 ? kv_heads : 1;
  return {count, kv_heads * head_dim / count,
          KvRowBytes(type, kv_heads, head_dim) / static_cast<size_t>(count)};
}

}  // namespace radixserve::kernels

// What the AVX2 and AVX-512 attention kernels' direct reads (AttentionKernels::scores and
// accumulate_rows) share: which caches they read in place, where a row is, and the fetch of the
// next tile's rows. Nothing here depends on the instruction set.
#pragma once

#include <cstdint>

#include "kernels/kv_type.h"
#include "kernels/x86/simd.h"

namespace radixserve::kernels::x86 {

// The element types and head sizes both variants read in place (int8 rows keep a scale after
// each head's codes, so they are always gathered).
inline bool ReadsDirect(KvType type, int64_t d) {
  const bool type_ok = type == KvType::kF32 || type == KvType::kBF16 || type == KvType::kF16 ||
                       type == KvType::kFp8E4M3 || type == KvType::kFp8E5M2;
  return type_ok && (d == 32 || d == 64 || d == 128 || d == 256);
}

// Row slots[j] of a cache of T elements, from element `offset`.
template <KvType T>
inline const void* RowAt(const void* base, const int32_t* slots, int64_t j, int64_t slot_stride,
                         int64_t offset) {
  return static_cast<const char*>(base) + (static_cast<int64_t>(slots[j]) * slot_stride + offset) *
                                              static_cast<int64_t>(KvTypeSize(T));
}

// Fetches the `bytes` from `row` into L2 (FetchL2), every line.
[[gnu::always_inline]] inline void FetchBytes(const char* row, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) FetchL2(row + b);
}

// Fetches the `bytes` of row i of `slots` (i < count) from `offset` into L2 (FetchL2), every
// line. The kernels call it one row slice per step of their own loads, never in a burst: a burst
// of a tile's lines fills the core's miss buffers and stalls it.
template <KvType T>
[[gnu::always_inline]] inline void FetchRow(const void* base, const int32_t* slots, int64_t i,
                                            int64_t count, int64_t slot_stride, int64_t offset,
                                            int64_t bytes) {
  if (i >= count) return;
  FetchBytes(static_cast<const char*>(RowAt<T>(base, slots, i, slot_stride, offset)), bytes);
}

// A tile's row pointers: rows[j] = row slots[j] from element `offset`, for j < count.
template <KvType T>
inline void RowPointers(const void* base, const int32_t* slots, int64_t count, int64_t slot_stride,
                        int64_t offset, const char** rows) {
  for (int64_t j = 0; j < count; ++j)
    rows[j] = static_cast<const char*>(RowAt<T>(base, slots, j, slot_stride, offset));
}

}  // namespace radixserve::kernels::x86

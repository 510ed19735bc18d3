// KvDtype: the element type of the K/V cache buffers (`--kv-cache-dtype`) and the row conversions
// between it and f32. Pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace radixserve::kv {

enum class KvDtype { kF32, kBF16, kF16 };

// Bytes per element: 4 for f32, 2 for bf16 and fp16.
size_t KvDtypeSize(KvDtype dtype);

// Canonical lowercase name ("float32", "bfloat16", "float16").
std::string_view KvDtypeName(KvDtype dtype);

// Resolves a `--kv-cache-dtype` value. "auto" yields `auto_dtype` (the model's activation dtype,
// chosen by the caller). Accepted: auto, fp32/float32, bf16/bfloat16, fp16/float16/half.
// The fp8 / fp4 spellings SGLang accepts (fp8_e5m2, fp8_e4m3, fp4_e2m1) return kUnsupported: they
// are a later issue. Anything else returns kInvalidArgument.
Expected<KvDtype> ParseKvCacheDtype(std::string_view flag, KvDtype auto_dtype);

// Scalar conversions are kernels/half.h's (F32ToBf16, Bf16ToF32, F32ToF16, F16ToF32).

// Converts `count` f32 values into `dst` laid out in `dtype` (dst holds count * KvDtypeSize bytes).
void StoreRow(const float* src, size_t count, KvDtype dtype, void* dst);
// Converts `count` elements of `dtype` at `src` into f32.
void LoadRow(const void* src, size_t count, KvDtype dtype, float* dst);

}  // namespace radixserve::kv

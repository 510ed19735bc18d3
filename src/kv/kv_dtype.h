// KvDtype: the element type of the K/V cache buffers (`--kv-cache-dtype`) and the row conversions
// between it and f32. Pure functions; safe from any thread.
//
// FP8 caches (fp8_e4m3, fp8_e5m2; formats in kernels/fp8.h) hold value / scale with one scale per
// layer for K and one for V (KvScales): 1.0 unless SGLang's `--quantization-param-path` JSON gives
// per-layer factors (kv_scales_file.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kernels/kv_type.h"

namespace radixserve::kv {

// The kernels' element type (kernels/kv_type.h: also KvTypeSize and IsFp8, found by ADL).
using KvDtype = kernels::KvType;

inline size_t KvDtypeSize(KvDtype dtype) { return kernels::KvTypeSize(dtype); }

// Canonical name, torch's spelling ("float32", "bfloat16", "float16", "float8_e4m3fn",
// "float8_e5m2", "int8").
std::string_view KvDtypeName(KvDtype dtype);

// Resolves a `--kv-cache-dtype` value. "auto" yields `auto_dtype` (the model's activation dtype,
// chosen by the caller). Accepted: auto, fp32/float32, bf16/bfloat16, fp16/float16/half,
// fp8_e4m3, fp8_e5m2, int8 (per-token, per-head scales; LightLLM's int8kv). fp4_e2m1 (which SGLang
// also accepts) returns kUnsupported; anything else kInvalidArgument.
Expected<KvDtype> ParseKvCacheDtype(std::string_view flag, KvDtype auto_dtype);

// Per-layer dequantization factors of an fp8 cache: layer l's K element with code c means
// decode(c) * k[l] (V likewise). Empty vectors mean 1.0 everywhere; the other dtypes ignore them.
struct KvScales {
  std::vector<float> k, v;

  float k_at(int32_t layer) const { return k.empty() ? 1.0f : k[static_cast<size_t>(layer)]; }
  float v_at(int32_t layer) const { return v.empty() ? 1.0f : v[static_cast<size_t>(layer)]; }
};

// Scalar conversions are kernels/half.h's (F32ToBf16, Bf16ToF32, F32ToF16, F16ToF32).

// Converts `count` f32 values into `dst` laid out in `dtype` (dst holds count * KvDtypeSize bytes;
// int8: one head, count codes then its 4-byte scale); fp8 stores src / scale (as
// src * (1 / scale), like the attention kernels).
void StoreRow(const float* src, size_t count, KvDtype dtype, void* dst, float scale = 1.0f);
// Converts `count` elements of `dtype` at `src` into f32 (fp8: times scale; int8: one head, times
// the scale stored after it).
void LoadRow(const void* src, size_t count, KvDtype dtype, float* dst, float scale = 1.0f);

}  // namespace radixserve::kv

#include "kv/kv_dtype.h"

#include <cstring>
#include <string>

#include "kernels/fp8.h"
#include "kernels/half.h"

namespace radixserve::kv {

std::string_view KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return "float32";
    case KvDtype::kBF16:
      return "bfloat16";
    case KvDtype::kF16:
      return "float16";
    case KvDtype::kFp8E4M3:
      return "float8_e4m3fn";
    case KvDtype::kFp8E5M2:
      return "float8_e5m2";
    case KvDtype::kInt8:
      return "int8";
  }
  RADIX_CHECK_MSG(false, "unknown KvDtype");
}

Expected<KvDtype> ParseKvCacheDtype(std::string_view flag, KvDtype auto_dtype) {
  if (flag == "auto") return auto_dtype;
  if (flag == "fp32" || flag == "float32") return KvDtype::kF32;
  if (flag == "bf16" || flag == "bfloat16") return KvDtype::kBF16;
  if (flag == "fp16" || flag == "float16" || flag == "half") return KvDtype::kF16;
  if (flag == "fp8_e4m3") return KvDtype::kFp8E4M3;
  if (flag == "fp8_e5m2") return KvDtype::kFp8E5M2;
  if (flag == "int8") return KvDtype::kInt8;
  if (flag == "fp4_e2m1") {
    return Unsupported(
        "--kv-cache-dtype fp4_e2m1 is not supported; use auto, bf16, fp16, fp32, "
        "fp8_e4m3, fp8_e5m2 or int8");
  }
  return InvalidArgument("--kv-cache-dtype: invalid choice '" + std::string(flag) +
                         "' (choose from auto, bf16, fp16, fp32, fp8_e4m3, fp8_e5m2, int8)");
}

void StoreRow(const float* src, size_t count, KvDtype dtype, void* dst, float scale) {
  const float inv = 1.0f / scale;
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(dst, src, count * sizeof(float));
      return;
    case KvDtype::kBF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < count; ++i) out[i] = kernels::F32ToBf16(src[i]);
      return;
    }
    case KvDtype::kF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < count; ++i) out[i] = kernels::F32ToF16(src[i]);
      return;
    }
    case KvDtype::kFp8E4M3: {
      auto* out = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < count; ++i) out[i] = kernels::F32ToFp8E4M3(src[i] * inv);
      return;
    }
    case KvDtype::kFp8E5M2: {
      auto* out = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < count; ++i) out[i] = kernels::F32ToFp8E5M2(src[i] * inv);
      return;
    }
    case KvDtype::kInt8:
      kernels::StoreInt8Head(src, static_cast<int64_t>(count), dst);
      return;
  }
}

void LoadRow(const void* src, size_t count, KvDtype dtype, float* dst, float scale) {
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(dst, src, count * sizeof(float));
      return;
    case KvDtype::kBF16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = kernels::Bf16ToF32(in[i]);
      return;
    }
    case KvDtype::kF16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = kernels::F16ToF32(in[i]);
      return;
    }
    case KvDtype::kFp8E4M3: {
      const auto* in = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = kernels::Fp8E4M3ToF32(in[i]) * scale;
      return;
    }
    case KvDtype::kFp8E5M2: {
      const auto* in = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = kernels::Fp8E5M2ToF32(in[i]) * scale;
      return;
    }
    case KvDtype::kInt8: {
      const auto* in = static_cast<const int8_t*>(src);
      const float s = kernels::Int8HeadScale(in, static_cast<int64_t>(count));
      for (size_t i = 0; i < count; ++i) dst[i] = static_cast<float>(in[i]) * s;
      return;
    }
  }
}

}  // namespace radixserve::kv

#include "kv/kv_dtype.h"

#include <cstring>
#include <string>

#include "kernels/half.h"

namespace radixserve::kv {

size_t KvDtypeSize(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return 4;
    case KvDtype::kBF16:
    case KvDtype::kF16:
      return 2;
  }
  RADIX_CHECK_MSG(false, "unknown KvDtype");
}

std::string_view KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return "float32";
    case KvDtype::kBF16:
      return "bfloat16";
    case KvDtype::kF16:
      return "float16";
  }
  RADIX_CHECK_MSG(false, "unknown KvDtype");
}

Expected<KvDtype> ParseKvCacheDtype(std::string_view flag, KvDtype auto_dtype) {
  if (flag == "auto") return auto_dtype;
  if (flag == "fp32" || flag == "float32") return KvDtype::kF32;
  if (flag == "bf16" || flag == "bfloat16") return KvDtype::kBF16;
  if (flag == "fp16" || flag == "float16" || flag == "half") return KvDtype::kF16;
  if (flag == "fp8_e5m2" || flag == "fp8_e4m3" || flag == "fp4_e2m1") {
    return Unsupported("--kv-cache-dtype " + std::string(flag) +
                       " is not supported yet (fp8/fp4 KV caches are planned for a later "
                       "release); use auto, bf16, fp16 or fp32");
  }
  return InvalidArgument("--kv-cache-dtype: invalid choice '" + std::string(flag) +
                         "' (choose from auto, bf16, fp16, fp32)");
}

void StoreRow(const float* src, size_t count, KvDtype dtype, void* dst) {
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
  }
}

void LoadRow(const void* src, size_t count, KvDtype dtype, float* dst) {
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
  }
}

}  // namespace radixserve::kv

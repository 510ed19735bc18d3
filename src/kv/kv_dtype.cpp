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

uint16_t F32ToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float Bf16ToF32(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// The kernels' portable conversions: clang 14 has no _Float16 on x86 without AVX512-FP16.
uint16_t F32ToF16(float value) { return kernels::F32ToF16(value); }

float F16ToF32(uint16_t bits) { return kernels::F16ToF32(bits); }

void StoreRow(const float* src, size_t count, KvDtype dtype, void* dst) {
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(dst, src, count * sizeof(float));
      return;
    case KvDtype::kBF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < count; ++i) out[i] = F32ToBf16(src[i]);
      return;
    }
    case KvDtype::kF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < count; ++i) out[i] = F32ToF16(src[i]);
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
      for (size_t i = 0; i < count; ++i) dst[i] = Bf16ToF32(in[i]);
      return;
    }
    case KvDtype::kF16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = F16ToF32(in[i]);
      return;
    }
  }
}

}  // namespace radixserve::kv

#include "kernels/ref/dequantize.h"

#include <cstring>

#include "common/check.h"
#include "kernels/half.h"
#include "kernels/mxfp4.h"

namespace radixserve::kernels::ref {
namespace {

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
float LoadHalf(const uint8_t* p) { return F16ToF32(LoadU16(p)); }

void BlockQ8_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const auto* q = reinterpret_cast<const int8_t*>(b + 2);
  for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(q[i]);
}

void BlockQ4_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint8_t* q = b + 2;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * static_cast<float>((q[i] & 0x0F) - 8);
    y[i + 16] = d * static_cast<float>((q[i] >> 4) - 8);
  }
}

void BlockMxfp4(const uint8_t* b, float* y) {
  const float d = Mxfp4Scale(b[0]);
  const uint8_t* q = b + 1;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * static_cast<float>(kMxfp4Values[q[i] & 0x0F]);
    y[i + 16] = d * static_cast<float>(kMxfp4Values[q[i] >> 4]);
  }
}

void BlockQ4_1(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float m = LoadHalf(b + 2);
  const uint8_t* q = b + 4;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * static_cast<float>(q[i] & 0x0F) + m;
    y[i + 16] = d * static_cast<float>(q[i] >> 4) + m;
  }
}

// Q5 formats: bit i of the 32-bit `high` word is the fifth bit of element i.
void BlockQ5(const uint8_t* q, uint32_t high, float d, float m, int offset, float* y) {
  for (int i = 0; i < 16; ++i) {
    const int lo = (q[i] & 0x0F) | static_cast<int>(((high >> i) & 1u) << 4);
    const int hi = (q[i] >> 4) | static_cast<int>(((high >> (i + 16)) & 1u) << 4);
    y[i] = d * static_cast<float>(lo - offset) + m;
    y[i + 16] = d * static_cast<float>(hi - offset) + m;
  }
}

void BlockQ5_0(const uint8_t* b, float* y) {
  uint32_t high;
  std::memcpy(&high, b + 2, 4);
  BlockQ5(b + 6, high, LoadHalf(b), 0.0f, 16, y);
}

void BlockQ5_1(const uint8_t* b, float* y) {
  uint32_t high;
  std::memcpy(&high, b + 4, 4);
  BlockQ5(b + 8, high, LoadHalf(b), LoadHalf(b + 2), 0, y);
}

// K-quants pack eight 6-bit scales and eight 6-bit mins into 12 bytes.
void ScaleMinK4(int j, const uint8_t* s, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void BlockQ4_K(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float dmin = LoadHalf(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int group = 0; group < 4; ++group) {
    int sc0, m0, sc1, m1;
    ScaleMinK4(2 * group, scales, &sc0, &m0);
    ScaleMinK4(2 * group + 1, scales, &sc1, &m1);
    const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
    const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
    for (int i = 0; i < 32; ++i) {
      y[i] = d0 * static_cast<float>(q[i] & 0x0F) - min0;
      y[i + 32] = d1 * static_cast<float>(q[i] >> 4) - min1;
    }
    q += 32;
    y += 64;
  }
}

void BlockQ5_K(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float dmin = LoadHalf(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  for (int group = 0; group < 4; ++group) {
    int sc0, m0, sc1, m1;
    ScaleMinK4(2 * group, scales, &sc0, &m0);
    ScaleMinK4(2 * group + 1, scales, &sc1, &m1);
    const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
    const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
    const int bit0 = 2 * group, bit1 = 2 * group + 1;
    for (int i = 0; i < 32; ++i) {
      const int lo = (ql[i] & 0x0F) + (((qh[i] >> bit0) & 1) << 4);
      const int hi = (ql[i] >> 4) + (((qh[i] >> bit1) & 1) << 4);
      y[i] = d0 * static_cast<float>(lo) - min0;
      y[i + 32] = d1 * static_cast<float>(hi) - min1;
    }
    ql += 32;
    y += 64;
  }
}

void BlockQ6_K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = LoadHalf(b + 208);
  for (int half = 0; half < 2; ++half) {
    for (int i = 0; i < 32; ++i) {
      const int s = i / 16;
      const int q1 = ((ql[i] & 0x0F) | (((qh[i] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[i + 32] & 0x0F) | (((qh[i] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[i] >> 4) | (((qh[i] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[i + 32] >> 4) | (((qh[i] >> 6) & 3) << 4)) - 32;
      y[i] = d * static_cast<float>(sc[s]) * static_cast<float>(q1);
      y[i + 32] = d * static_cast<float>(sc[s + 2]) * static_cast<float>(q2);
      y[i + 64] = d * static_cast<float>(sc[s + 4]) * static_cast<float>(q3);
      y[i + 96] = d * static_cast<float>(sc[s + 6]) * static_cast<float>(q4);
    }
    ql += 64;
    qh += 32;
    sc += 8;
    y += 128;
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn BlockDecoder(WeightFormat format) {
  switch (format) {
    case WeightFormat::kQ8_0:
      return BlockQ8_0;
    case WeightFormat::kQ4_0:
      return BlockQ4_0;
    case WeightFormat::kQ4_1:
      return BlockQ4_1;
    case WeightFormat::kQ5_0:
      return BlockQ5_0;
    case WeightFormat::kQ5_1:
      return BlockQ5_1;
    case WeightFormat::kQ4_K:
      return BlockQ4_K;
    case WeightFormat::kQ5_K:
      return BlockQ5_K;
    case WeightFormat::kQ6_K:
      return BlockQ6_K;
    case WeightFormat::kMXFP4:
      return BlockMxfp4;
    default:
      return nullptr;
  }
}

}  // namespace

void Dequantize(WeightFormat format, const void* src, float* dst, int64_t count) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (format) {
    case WeightFormat::kF32:
      std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
      return;
    case WeightFormat::kF16:
      for (int64_t i = 0; i < count; ++i) dst[i] = LoadHalf(bytes + 2 * i);
      return;
    case WeightFormat::kBF16:
      for (int64_t i = 0; i < count; ++i) dst[i] = Bf16ToF32(LoadU16(bytes + 2 * i));
      return;
    default:
      break;
  }
  const int64_t block = BlockElements(format);
  const int64_t block_bytes = BlockBytes(format);
  RADIX_CHECK(count % block == 0);
  BlockFn decode = BlockDecoder(format);
  RADIX_CHECK(decode != nullptr);
  for (int64_t b = 0; b < count / block; ++b) decode(bytes + b * block_bytes, dst + b * block);
}

}  // namespace radixserve::kernels::ref

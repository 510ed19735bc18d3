// Scalar decoding of ggml blocks into the integer kernels' codes, and the scalar panel packer.
#include <cstring>

#include "common/check.h"
#include "kernels/half.h"
#include "kernels/mxfp4.h"
#include "kernels/x86/quant_kernels.h"

namespace radixserve::kernels::x86 {
namespace {

float LoadHalf(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return F16ToF32(v);
}

// Same packing of 6-bit scales and mins as ref/dequantize.cpp.
void ScaleMinK4(int j, const uint8_t* s, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void Nibbles(const uint8_t* q, uint8_t* u) {
  for (int i = 0; i < 16; ++i) {
    u[i] = q[i] & 0x0F;
    u[i + 16] = q[i] >> 4;
  }
}

void FiveBits(const uint8_t* q, uint32_t high, uint8_t* u) {
  Nibbles(q, u);
  for (int i = 0; i < 32; ++i) u[i] = static_cast<uint8_t>(u[i] | (((high >> i) & 1u) << 4));
}

void DecodeK(const uint8_t* b, bool five_bits, uint8_t* u, float* scale, float* min) {
  const float d = LoadHalf(b), dmin = LoadHalf(b + 2);
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + (five_bits ? 48 : 16);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    ScaleMinK4(j, b + 4, &sc, &m);
    scale[j] = d * static_cast<float>(sc);
    min[j] = -dmin * static_cast<float>(m);
    const uint8_t* q = ql + (j / 2) * 32;
    for (int i = 0; i < 32; ++i) {
      int v = (j % 2 == 0) ? (q[i] & 0x0F) : (q[i] >> 4);
      if (five_bits) v |= ((qh[i] >> j) & 1) << 4;
      u[j * 32 + i] = static_cast<uint8_t>(v);
    }
  }
}

void DecodeQ6_K(const uint8_t* b, uint8_t* u, float* scale) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = LoadHalf(b + 208);
  for (int j = 0; j < 16; ++j) scale[j] = d * static_cast<float>(sc[j]);
  for (int half = 0; half < 2; ++half) {
    uint8_t* y = u + half * 128;
    for (int i = 0; i < 32; ++i) {
      y[i] = static_cast<uint8_t>((ql[i] & 0x0F) | (((qh[i] >> 0) & 3) << 4));
      y[i + 32] = static_cast<uint8_t>((ql[i + 32] & 0x0F) | (((qh[i] >> 2) & 3) << 4));
      y[i + 64] = static_cast<uint8_t>((ql[i] >> 4) | (((qh[i] >> 4) & 3) << 4));
      y[i + 96] = static_cast<uint8_t>((ql[i + 32] >> 4) | (((qh[i] >> 6) & 3) << 4));
    }
    ql += 64;
    qh += 32;
  }
}

}  // namespace

QuantFormatInfo FormatInfo(WeightFormat format, bool signed_q8) {
  switch (format) {
    case WeightFormat::kQ8_0:
      return {32, signed_q8 ? 0 : 128, false};
    case WeightFormat::kQ4_0:
      return {32, 8, false};
    case WeightFormat::kQ5_0:
      return {32, 16, false};
    case WeightFormat::kQ4_1:
    case WeightFormat::kQ5_1:
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K:
      return {32, 0, true};
    case WeightFormat::kQ6_K:
      return {16, 32, false};
    case WeightFormat::kMXFP4:
      return {32, kMxfp4CodeOffset, false};
    default:
      RADIX_CHECK_MSG(false, "not a block-quantized format");
      return {};
  }
}

void DecodeBlockCodes(WeightFormat format, const uint8_t* b, bool signed_q8, uint8_t* u,
                      float* scale, float* min) {
  switch (format) {
    case WeightFormat::kQ8_0:
      scale[0] = LoadHalf(b);
      min[0] = 0.0f;
      for (int i = 0; i < 32; ++i) u[i] = static_cast<uint8_t>(b[2 + i] ^ (signed_q8 ? 0 : 0x80));
      return;
    case WeightFormat::kQ4_0:
      scale[0] = LoadHalf(b);
      min[0] = 0.0f;
      Nibbles(b + 2, u);
      return;
    case WeightFormat::kQ4_1:
      scale[0] = LoadHalf(b);
      min[0] = LoadHalf(b + 2);
      Nibbles(b + 4, u);
      return;
    case WeightFormat::kQ5_0: {
      uint32_t high;
      std::memcpy(&high, b + 2, 4);
      scale[0] = LoadHalf(b);
      min[0] = 0.0f;
      FiveBits(b + 6, high, u);
      return;
    }
    case WeightFormat::kQ5_1: {
      uint32_t high;
      std::memcpy(&high, b + 4, 4);
      scale[0] = LoadHalf(b);
      min[0] = LoadHalf(b + 2);
      FiveBits(b + 8, high, u);
      return;
    }
    case WeightFormat::kQ4_K:
      DecodeK(b, false, u, scale, min);
      return;
    case WeightFormat::kQ5_K:
      DecodeK(b, true, u, scale, min);
      return;
    case WeightFormat::kQ6_K:
      for (int j = 0; j < 16; ++j) min[j] = 0.0f;
      DecodeQ6_K(b, u, scale);
      return;
    case WeightFormat::kMXFP4:
      scale[0] = Mxfp4Scale(b[0]);
      min[0] = 0.0f;
      for (int i = 0; i < 16; ++i) {
        u[i] = static_cast<uint8_t>(kMxfp4Values[b[1 + i] & 0x0F] + kMxfp4CodeOffset);
        u[i + 16] = static_cast<uint8_t>(kMxfp4Values[b[1 + i] >> 4] + kMxfp4CodeOffset);
      }
      return;
    default:
      RADIX_CHECK_MSG(false, "not a block-quantized format");
  }
}

void PackPanelScalar(const WeightMatrix& w, int64_t row0, int64_t panel_rows, bool signed_q8,
                     uint8_t* panel) {
  const int64_t block = BlockElements(w.format), block_bytes = BlockBytes(w.format);
  const int64_t sub = FormatInfo(w.format, signed_q8).sub;
  const int64_t subs_per_block = block / sub, stride = PanelSubBytes(sub, panel_rows);
  uint8_t codes[256];
  float scale[16], min[16];
  for (int64_t r = 0; r < panel_rows; ++r) {
    const int64_t row = row0 + r < w.rows ? row0 + r : w.rows - 1;
    const auto* src = static_cast<const uint8_t*>(w.row(row));
    for (int64_t b = 0; b < w.cols / block; ++b) {
      DecodeBlockCodes(w.format, src + b * block_bytes, signed_q8, codes, scale, min);
      for (int64_t j = 0; j < subs_per_block; ++j) {
        uint8_t* dst = panel + (b * subs_per_block + j) * stride;
        for (int64_t g = 0; g < sub / 4; ++g) {
          std::memcpy(dst + (g * panel_rows + r) * 4, codes + j * sub + g * 4, 4);
        }
        auto* floats = reinterpret_cast<float*>(dst + sub * panel_rows);
        floats[r] = scale[j];
        floats[panel_rows + r] = min[j];
      }
    }
  }
}

bool HasCompactPanelLayout(WeightFormat format) {
  return format == WeightFormat::kQ4_0 || format == WeightFormat::kQ4_1 ||
         format == WeightFormat::kQ5_0 || format == WeightFormat::kQ5_1 ||
         format == WeightFormat::kQ8_0 || format == WeightFormat::kQ4_K ||
         format == WeightFormat::kQ5_K || format == WeightFormat::kQ6_K ||
         format == WeightFormat::kMXFP4;
}

namespace {

// The 4 bytes of a row's lane in a fifth-bit register (Q5_0, Q5_1, Q5_K's sub-blocks) from
// `high`, whose bit i is bit 4 of element i: bit k of byte e is that of element 4k + e.
void FifthBitLane(uint32_t high, uint8_t* lane) {
  for (int e = 0; e < 4; ++e) {
    uint8_t byte = 0;
    for (int k = 0; k < 8; ++k) byte |= ((high >> (4 * k + e)) & 1) << k;
    lane[e] = byte;
  }
}

}  // namespace

void PackCompactLayoutPanel(const WeightMatrix& w, int64_t row0, int64_t panel_rows,
                            uint8_t* panel) {
  RADIX_CHECK(HasCompactPanelLayout(w.format));
  const int64_t block_bytes = BlockBytes(w.format), lanes = 4 * panel_rows;
  const int64_t out_bytes = CompactLayoutBlockBytes(w.format, panel_rows);
  const bool five = w.format == WeightFormat::kQ5_K;
  const bool q4 = w.format == WeightFormat::kQ4_K || five;
  const int64_t regs_per_sub = five ? 5 : 4;
  const bool legacy = w.format == WeightFormat::kQ4_0 || w.format == WeightFormat::kQ4_1 ||
                      w.format == WeightFormat::kQ5_0 || w.format == WeightFormat::kQ5_1 ||
                      w.format == WeightFormat::kQ8_0;
  uint8_t u[256];
  float scale[16], min[16];
  for (int64_t r = 0; r < panel_rows; ++r) {
    const int64_t row = row0 + r < w.rows ? row0 + r : w.rows - 1;
    const auto* src = static_cast<const uint8_t*>(w.row(row));
    for (int64_t b = 0; b < w.cols / BlockElements(w.format); ++b) {
      const uint8_t* block = src + b * block_bytes;
      uint8_t* out = panel + b * out_bytes;
      if (w.format == WeightFormat::kMXFP4) {
        for (int g = 0; g < 4; ++g) std::memcpy(out + g * lanes + 4 * r, block + 1 + 4 * g, 4);
        const float d = Mxfp4Scale(block[0]);
        std::memcpy(out + 4 * lanes + 4 * r, &d, sizeof(d));
        continue;
      }
      if (legacy) {
        const bool fifth = w.format == WeightFormat::kQ5_0 || w.format == WeightFormat::kQ5_1;
        const int64_t halves = FormatInfo(w.format, false).has_min ? 2 : 1;  // d, then m
        const int regs = w.format == WeightFormat::kQ8_0 ? 8 : 4;
        // Q5_0 / Q5_1: the 32 fifth bits (bit i: element i) between the halves and the nibbles.
        const uint8_t* codes = block + 2 * halves + (fifth ? 4 : 0);
        for (int g = 0; g < regs; ++g) std::memcpy(out + g * lanes + 4 * r, codes + 4 * g, 4);
        if (fifth) {
          uint32_t high;
          std::memcpy(&high, block + 2 * halves, sizeof(high));
          FifthBitLane(high, out + regs * lanes + 4 * r);
        }
        const int64_t at = (regs + (fifth ? 1 : 0)) * lanes;
        for (int64_t k = 0; k < halves; ++k) {
          std::memcpy(out + at + 2 * (k * panel_rows + r), block + 2 * k, 2);
        }
        continue;
      }
      DecodeBlockCodes(w.format, block, false, u, scale, min);
      if (q4) {
        const int64_t code_bytes = 8 * regs_per_sub * lanes;
        for (int j = 0; j < 8; ++j) {
          uint8_t* regs = out + j * regs_per_sub * lanes;
          for (int g = 0; g < 4; ++g) {
            for (int e = 0; e < 4; ++e) {
              regs[g * lanes + 4 * r + e] = static_cast<uint8_t>(
                  (u[32 * j + 4 * g + e] & 0x0F) | ((u[32 * j + 16 + 4 * g + e] & 0x0F) << 4));
            }
          }
          if (five) {
            uint32_t high = 0;
            for (int i = 0; i < 32; ++i)
              high |= static_cast<uint32_t>((u[32 * j + i] >> 4) & 1) << i;
            FifthBitLane(high, regs + 4 * lanes + 4 * r);
          }
          int sc, m;
          ScaleMinK4(j, block + 4, &sc, &m);
          out[code_bytes + j * panel_rows + r] = static_cast<uint8_t>(sc);
          out[code_bytes + (8 + j) * panel_rows + r] = static_cast<uint8_t>(m);
        }
        auto* floats = reinterpret_cast<float*>(out + code_bytes + 16 * panel_rows);
        floats[r] = LoadHalf(block);
        floats[panel_rows + r] = LoadHalf(block + 2);
      } else {
        for (int j = 0; j < 16; ++j) {
          uint8_t* regs = out + j * 3 * lanes;
          for (int e = 0; e < 4; ++e) {
            for (int g = 0; g < 2; ++g) {
              regs[g * lanes + 4 * r + e] = static_cast<uint8_t>(
                  (u[16 * j + 4 * g + e] & 0x0F) | ((u[16 * j + 8 + 4 * g + e] & 0x0F) << 4));
            }
            uint8_t high = 0;
            for (int k = 0; k < 4; ++k) high |= ((u[16 * j + 4 * k + e] >> 4) & 3) << (2 * k);
            regs[2 * lanes + 4 * r + e] = high;
          }
          out[48 * lanes + j * panel_rows + r] = block[192 + j];
        }
        auto* floats = reinterpret_cast<float*>(out + 48 * lanes + 16 * panel_rows);
        floats[r] = LoadHalf(block + 208);
      }
    }
  }
}

}  // namespace radixserve::kernels::x86

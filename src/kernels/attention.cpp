#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/check.h"
#include "kernels/float_matmul.h"
#include "kernels/fp8.h"
#include "kernels/half.h"

namespace radixserve::kernels {

namespace x86 {
const AttentionKernels& Avx2AttentionTable();
const AttentionKernels& Avx512AttentionTable();
}  // namespace x86

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void RefGather(const void* base, KvType type, float scale, const int32_t* slots, int64_t count,
               int64_t slot_stride, int64_t offset, int64_t d, float* dst) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t at = static_cast<int64_t>(slots[i]) * slot_stride + offset;
    float* out = dst + i * d;
    switch (type) {
      case KvType::kF32:
        std::memcpy(out, static_cast<const float*>(base) + at,
                    sizeof(float) * static_cast<size_t>(d));
        break;
      case KvType::kBF16:
        for (int64_t c = 0; c < d; ++c)
          out[c] = Bf16ToF32(static_cast<const uint16_t*>(base)[at + c]);
        break;
      case KvType::kF16:
        for (int64_t c = 0; c < d; ++c)
          out[c] = F16ToF32(static_cast<const uint16_t*>(base)[at + c]);
        break;
      case KvType::kFp8E4M3:
        for (int64_t c = 0; c < d; ++c)
          out[c] = Fp8E4M3ToF32(static_cast<const uint8_t*>(base)[at + c]) * scale;
        break;
      case KvType::kFp8E5M2:
        for (int64_t c = 0; c < d; ++c)
          out[c] = Fp8E5M2ToF32(static_cast<const uint8_t*>(base)[at + c]) * scale;
        break;
      case KvType::kInt8: {
        const auto* codes = static_cast<const int8_t*>(base) + at;
        const float s = Int8HeadScale(codes, d);
        for (int64_t c = 0; c < d; ++c) out[c] = static_cast<float>(codes[c]) * s;
        break;
      }
    }
  }
}

float RefExpTile(float* x, float max) {
  float sum = 0.0f;
  for (int64_t i = 0; i < kKeyTile; ++i) {
    x[i] = x[i] == kNegInf ? 0.0f : std::exp(x[i] - max);
    sum += x[i];
  }
  return sum;
}

void RefAccumulate(const float* p, int64_t nq, const float* v, int64_t nk, int64_t d, float* acc) {
  for (int64_t q = 0; q < nq; ++q) {
    for (int64_t j = 0; j < nk; ++j) {
      const float w = p[q * kKeyTile + j];
      for (int64_t c = 0; c < d; ++c) acc[q * d + c] += w * v[j * d + c];
    }
  }
}

void RefStore(const float* src, int64_t count, KvType type, float scale, void* dst) {
  const float inv = 1.0f / scale;
  switch (type) {
    case KvType::kF32:
      std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(count));
      break;
    case KvType::kBF16:
      for (int64_t i = 0; i < count; ++i) static_cast<uint16_t*>(dst)[i] = F32ToBf16(src[i]);
      break;
    case KvType::kF16:
      for (int64_t i = 0; i < count; ++i) static_cast<uint16_t*>(dst)[i] = F32ToF16(src[i]);
      break;
    case KvType::kFp8E4M3:
      for (int64_t i = 0; i < count; ++i)
        static_cast<uint8_t*>(dst)[i] = F32ToFp8E4M3(src[i] * inv);
      break;
    case KvType::kFp8E5M2:
      for (int64_t i = 0; i < count; ++i)
        static_cast<uint8_t*>(dst)[i] = F32ToFp8E5M2(src[i] * inv);
      break;
    case KvType::kInt8:
      StoreInt8Head(src, count, dst);
      break;
  }
}

// max of x[0, n): eight independent running maxima (max is exact, so the grouping cannot change
// the result) instead of one serial dependency chain.
float RangeMax(const float* x, int64_t n) {
  float m[8];
  std::fill(m, m + 8, kNegInf);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int k = 0; k < 8; ++k) m[k] = std::max(m[k], x[j + k]);
  }
  for (; j < n; ++j) m[0] = std::max(m[0], x[j]);
  return *std::max_element(m, m + 8);
}

constexpr AttentionKernels kRef{"ref", RefGather, RefExpTile, RefAccumulate, RefStore};

}  // namespace

size_t KvTypeSize(KvType type) {
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

void StoreInt8Head(const float* src, int64_t count, void* dst) {
  float amax = 0.0f;
  for (int64_t i = 0; i < count; ++i) amax = std::max(amax, std::fabs(src[i]));
  const float scale = amax / 127.0f;
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  auto* codes = static_cast<int8_t*>(dst);
  for (int64_t i = 0; i < count; ++i) {
    // |src * inv| <= 127 up to rounding; clamp so that rounding can never wrap.
    const float q = std::nearbyint(std::clamp(src[i] * inv, -127.0f, 127.0f));
    codes[i] = static_cast<int8_t>(q);
  }
  std::memcpy(codes + count, &scale, sizeof(scale));
}

bool IsFp8(KvType type) { return type == KvType::kFp8E4M3 || type == KvType::kFp8E5M2; }

const AttentionKernels& RefAttentionKernels() { return kRef; }

const AttentionKernels* Avx2AttentionKernels() {
  return Avx2FloatKernels() != nullptr ? &x86::Avx2AttentionTable() : nullptr;
}

const AttentionKernels* Avx512AttentionKernels() {
  return Avx512FloatKernels() != nullptr ? &x86::Avx512AttentionTable() : nullptr;
}

std::vector<const AttentionKernels*> AvailableAttentionKernels() {
  std::vector<const AttentionKernels*> out{&kRef};
  if (const AttentionKernels* k = Avx2AttentionKernels()) out.push_back(k);
  if (const AttentionKernels* k = Avx512AttentionKernels()) out.push_back(k);
  return out;
}

const AttentionKernels& AttentionKernelsFor(const KernelTable& table) {
  const std::string_view isa = FloatKernelsFor(table).name;
  const AttentionKernels* k = isa == "avx512" ? Avx512AttentionKernels()
                              : isa == "avx2" ? Avx2AttentionKernels()
                                              : nullptr;
  return k != nullptr ? *k : kRef;
}

void AttendChunk(const KernelTable& table, const AttentionShape& shape, const QueryBlock& block,
                 KvBuffer k_cache, KvBuffer v_cache, const int32_t* kv_slots, int64_t key_begin,
                 int64_t key_end, float* m, float* l, float* acc) {
  RADIX_CHECK(key_begin >= 0 && key_begin % kKeyTile == 0 && key_begin <= key_end);
  const AttentionKernels& ak = AttentionKernelsFor(table);
  const FloatGemmKernels& gk = FloatKernelsFor(table);
  const int64_t d = shape.head_dim;
  const int64_t nq = block.nq;
  const int64_t head_elements = KvHeadElements(k_cache.type, d);
  const int64_t slot_stride = static_cast<int64_t>(shape.num_kv_heads) * head_elements;
  const int64_t offset = static_cast<int64_t>(block.kv_head) * head_elements;
  thread_local std::vector<float> keys, values, scores;
  keys.resize(static_cast<size_t>(kKeyTile * d));
  values.resize(static_cast<size_t>(kKeyTile * d));
  scores.resize(static_cast<size_t>(kKeyTile * nq));
  std::fill(m, m + nq, kNegInf);
  std::fill(l, l + nq, 0.0f);
  std::fill(acc, acc + nq * d, 0.0f);
  for (int64_t j0 = key_begin; j0 < key_end; j0 += kKeyTile) {
    const int64_t nk = std::min(kKeyTile, key_end - j0);
    bool any = false;
    for (int64_t i = 0; i < nq && !any; ++i) any = block.first[i] < j0 + nk && block.last[i] >= j0;
    if (!any) continue;
    ak.gather(k_cache.data, k_cache.type, k_cache.scale, kv_slots + j0, nk, slot_stride, offset, d,
              keys.data());
    gk.gemm(block.q, d, nq, keys.data(), WeightFormat::kF32, d * 4, d, 0, nk, scores.data(),
            kKeyTile);
    for (int64_t i = 0; i < nq; ++i) {
      float* s = scores.data() + i * kKeyTile;
      const int64_t lo = std::max(block.first[i], j0) - j0;
      const int64_t hi = std::min(block.last[i], j0 + nk - 1) - j0;  // inclusive
      float tile_max = kNegInf;
      if (lo <= hi) {
        std::fill(s, s + lo, kNegInf);
        std::fill(s + hi + 1, s + kKeyTile, kNegInf);
        for (int64_t j = lo; j <= hi; ++j) s[j] *= shape.scale;
        if (shape.softcap > 0.0f) {
          for (int64_t j = lo; j <= hi; ++j) s[j] = shape.softcap * std::tanh(s[j] / shape.softcap);
        }
        tile_max = RangeMax(s + lo, hi - lo + 1);
      }
      if (tile_max == kNegInf) {  // no key of this tile: zero weights, state unchanged
        std::fill(s, s + kKeyTile, 0.0f);
        continue;
      }
      const float m_new = std::max(m[i], tile_max);
      const float alpha = m[i] == kNegInf ? 0.0f : std::exp(m[i] - m_new);
      const float sum = ak.exp_tile(s, m_new);
      l[i] = l[i] * alpha + sum;
      if (alpha != 1.0f) {
        for (int64_t c = 0; c < d; ++c) acc[i * d + c] *= alpha;
      }
      m[i] = m_new;
    }
    ak.gather(v_cache.data, v_cache.type, v_cache.scale, kv_slots + j0, nk, slot_stride, offset, d,
              values.data());
    ak.accumulate(scores.data(), nq, values.data(), nk, d, acc);
  }
}

void MergeChunks(const float* m, const float* l, int64_t stride, const float* acc,
                 int64_t acc_stride, int64_t count, int64_t head_dim, float* out, float sink) {
  float max = sink;
  for (int64_t c = 0; c < count; ++c) max = std::max(max, m[c * stride]);
  std::fill(out, out + head_dim, 0.0f);
  if (max == kNegInf) return;
  float sum = sink == kNegInf ? 0.0f : std::exp(sink - max);
  for (int64_t c = 0; c < count; ++c) {
    if (m[c * stride] == kNegInf) continue;
    const float w = std::exp(m[c * stride] - max);
    sum += l[c * stride] * w;
    const float* a = acc + c * acc_stride;
    for (int64_t i = 0; i < head_dim; ++i) out[i] += w * a[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < head_dim; ++i) out[i] *= inv;
}

}  // namespace radixserve::kernels

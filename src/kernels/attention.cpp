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

void RefAccumulate(const float* p, int64_t nq, const float* v, int64_t ldv, int64_t nk, int64_t d,
                   const float* rescale, float* acc) {
  for (int64_t q = 0; q < nq; ++q) {
    for (int64_t c = 0; c < d; ++c)
      acc[q * d + c] = rescale != nullptr ? acc[q * d + c] * rescale[q] : 0.0f;
    for (int64_t j = 0; j < nk; ++j) {
      const float w = p[q * kKeyTile + j];
      for (int64_t c = 0; c < d; ++c) acc[q * d + c] += w * v[j * ldv + c];
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

constexpr AttentionKernels kRef{"ref",   RefGather, RefExpTile, RefAccumulate, RefStore,
                                nullptr, nullptr,   nullptr,    nullptr};

}  // namespace

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

// Reads rows in place (AttentionKernels::scores, accumulate_rows) when a chunk's slots lie in
// runs of at least kMinRun consecutive slots on average: such rows stream, from the hardware
// prefetchers and the next-tile fetches. Scattered rows (a pool after much churn) come faster
// through gather's many independent loads. Both give the same bits.
constexpr int64_t kMinRun = 8;

bool RowsInRuns(const int32_t* slots, int64_t begin, int64_t end) {
  int64_t breaks = 0;
  for (int64_t j = begin + 1; j < end; ++j) breaks += slots[j] != slots[j - 1] + 1 ? 1 : 0;
  return breaks * kMinRun <= end - begin;
}

// Bytes of gathered floats one pass of AttendChunkHeads keeps (within a 32 KB L1 data cache
// beside the queries and scores).
constexpr int64_t kGatherBytes = 32 * 1024;

void AttendChunkHeads(const KernelTable& table, const AttentionShape& shape,
                      const QueryBlock* blocks, int heads, KvBuffer k_cache, KvBuffer v_cache,
                      const int32_t* kv_slots, int64_t key_begin, int64_t key_end, float* const* m,
                      float* const* l, float* const* acc) {
  RADIX_CHECK(key_begin >= 0 && key_begin % kKeyTile == 0 && key_begin <= key_end);
  RADIX_CHECK(heads >= 1);
  const int64_t d = shape.head_dim;
  const int64_t head_elements = KvHeadElements(k_cache.type, d);
  // A tile's gathered keys for all heads should stay in L1 (the score and accumulate passes
  // read them back): at most kGatherBytes of floats per pass. int8 rows keep a scale after each
  // head's codes, so they are gathered one head at a time.
  const AttentionKernels& ak = AttentionKernelsFor(table);
  // Rows read in place are never staged, so all heads go in one pass.
  const bool direct = ak.reads_direct != nullptr && ak.reads_direct(k_cache.type, d) &&
                      RowsInRuns(kv_slots, key_begin, key_end);
  const int per_pass =
      direct ? heads
      : head_elements != d
          ? 1
          : static_cast<int>(std::max<int64_t>(1, kGatherBytes / (kKeyTile * d * 4)));
  if (heads > per_pass) {
    for (int h = 0; h < heads; h += per_pass) {
      const int n = std::min(per_pass, heads - h);
      AttendChunkHeads(table, shape, blocks + h, n, k_cache, v_cache, kv_slots, key_begin, key_end,
                       m + h, l + h, acc + h);
    }
    return;
  }
  const FloatGemmKernels& gk = FloatKernelsFor(table);
  const QueryBlock& first = blocks[0];
  const int64_t nq = first.nq;
  const int64_t slot_stride = static_cast<int64_t>(shape.num_kv_heads) * head_elements;
  const int64_t offset = static_cast<int64_t>(first.kv_head) * head_elements;
  const int64_t width = heads * d;  // gathered floats per key: the heads side by side
  // One buffer for a tile's keys, then (once the scores are computed) its values.
  thread_local std::vector<float> rows, scores, m_new, sums, rescale;
  if (!direct) rows.resize(static_cast<size_t>(kKeyTile * width));
  scores.resize(static_cast<size_t>(heads * kKeyTile * nq));
  m_new.resize(static_cast<size_t>(nq));  // a query's maximum after the tile (-inf: no key)
  sums.resize(static_cast<size_t>(nq));
  rescale.resize(static_cast<size_t>(heads * nq));  // of each query's sums before the tile's keys
  for (int h = 0; h < heads; ++h) {
    RADIX_CHECK(blocks[h].nq == nq && blocks[h].kv_head == first.kv_head + h);
    std::fill(m[h], m[h] + nq, kNegInf);
    std::fill(l[h], l[h] + nq, 0.0f);
  }
  // The sums are written from zero by the first tile that has keys (acc is not cleared first:
  // for 512 tokens at depth 8192 that is 143 MB of partials per layer).
  bool started = false;
  // Direct reads take the heads' queries side by side.
  const float* queries = first.q;
  if (direct) {
    thread_local std::vector<float> side_by_side;
    bool adjacent = true;
    for (int h = 1; h < heads; ++h) adjacent = adjacent && blocks[h].q == first.q + h * nq * d;
    if (!adjacent) {
      side_by_side.resize(static_cast<size_t>(heads * nq * d));
      for (int h = 0; h < heads; ++h) {
        std::copy(blocks[h].q, blocks[h].q + nq * d, side_by_side.begin() + h * nq * d);
      }
      queries = side_by_side.data();
    }
  }
  // Direct reads fetch the next tile's rows while this one computes, past the chunk's end too
  // (up to the last key any query sees: the sequence's next chunk, usually this thread's next).
  int64_t seen_end = key_end;
  for (int64_t i = 0; i < nq; ++i) seen_end = std::max(seen_end, first.last[i] + 1);
  const bool fused_scale = ak.scale_max != nullptr && shape.scale > 0.0f && shape.softcap <= 0.0f;
  for (int64_t j0 = key_begin; j0 < key_end; j0 += kKeyTile) {
    const int64_t nk = std::min(kKeyTile, key_end - j0);
    const int64_t next_end = std::min(seen_end, j0 + 2 * kKeyTile);
    bool any = false;
    for (int64_t i = 0; i < nq && !any; ++i) any = first.first[i] < j0 + nk && first.last[i] >= j0;
    if (!any) continue;
    const int32_t* next = kv_slots + j0 + kKeyTile;
    const int64_t next_count = std::max<int64_t>(0, next_end - j0 - kKeyTile);
    if (direct) {
      ak.scores(queries, heads, nq, k_cache.data, k_cache.type, k_cache.scale, kv_slots + j0, nk,
                slot_stride, offset, d, next, next_count, scores.data());
    } else {
      ak.gather(k_cache.data, k_cache.type, k_cache.scale, kv_slots + j0, nk, slot_stride, offset,
                width, rows.data());
    }
    for (int h = 0; h < heads; ++h) {
      float* head_scores = scores.data() + h * kKeyTile * nq;
      if (!direct) {
        gk.gemm(blocks[h].q, d, nq, rows.data() + h * d, WeightFormat::kF32, width * 4, d, 0, nk,
                head_scores, kKeyTile);
      }
      // The online softmax in three passes over the queries (each query's operations in the same
      // order as one pass would do them), so the queries' exponentials, which do not depend on
      // each other, run back to back instead of behind each query's maximum.
      for (int64_t i = 0; i < nq; ++i) {
        float* s = head_scores + i * kKeyTile;
        const int64_t lo = std::max(first.first[i], j0) - j0;
        const int64_t hi = std::min(first.last[i], j0 + nk - 1) - j0;  // inclusive
        float tile_max = kNegInf;
        if (lo <= hi) {
          std::fill(s, s + lo, kNegInf);
          std::fill(s + hi + 1, s + kKeyTile, kNegInf);
          if (fused_scale) {
            tile_max = ak.scale_max(s, shape.scale);
          } else {
            for (int64_t j = lo; j <= hi; ++j) s[j] *= shape.scale;
            if (shape.softcap > 0.0f) {
              for (int64_t j = lo; j <= hi; ++j) {
                s[j] = shape.softcap * std::tanh(s[j] / shape.softcap);
              }
            }
            tile_max = RangeMax(s + lo, hi - lo + 1);
          }
        }
        if (tile_max == kNegInf) {  // no key of this tile: zero weights, state unchanged
          std::fill(s, s + kKeyTile, 0.0f);
          m_new[static_cast<size_t>(i)] = kNegInf;
          continue;
        }
        m_new[static_cast<size_t>(i)] = std::max(m[h][i], tile_max);
      }
      for (int64_t i = 0; i < nq; ++i) {
        if (m_new[static_cast<size_t>(i)] == kNegInf) continue;
        sums[static_cast<size_t>(i)] =
            ak.exp_tile(head_scores + i * kKeyTile, m_new[static_cast<size_t>(i)]);
      }
      // A query's sums are multiplied by alpha (1: no key here, so its state stays) as the value
      // pass loads them.
      float* alphas = rescale.data() + h * nq;
      for (int64_t i = 0; i < nq; ++i) {
        const float mn = m_new[static_cast<size_t>(i)];
        alphas[i] = 1.0f;
        if (mn == kNegInf) continue;
        float& mi = m[h][i];
        const float alpha = mi == kNegInf ? 0.0f : std::exp(mi - mn);
        l[h][i] = l[h][i] * alpha + sums[static_cast<size_t>(i)];
        alphas[i] = alpha;
        mi = mn;
      }
    }
    const float* tile_rescale = started ? rescale.data() : nullptr;
    started = true;
    if (direct) {
      ak.accumulate_rows(scores.data(), heads, nq, v_cache.data, v_cache.type, v_cache.scale,
                         kv_slots + j0, nk, slot_stride, offset, d, next, next_count, tile_rescale,
                         acc);
      continue;
    }
    ak.gather(v_cache.data, v_cache.type, v_cache.scale, kv_slots + j0, nk, slot_stride, offset,
              width, rows.data());
    for (int h = 0; h < heads; ++h) {
      ak.accumulate(scores.data() + h * kKeyTile * nq, nq, rows.data() + h * d, width, nk, d,
                    RescaleFrom(tile_rescale, h * nq), acc[h]);
    }
  }
  if (!started) {  // no key in the range for any query
    for (int h = 0; h < heads; ++h) std::fill(acc[h], acc[h] + nq * d, 0.0f);
  }
}

void AttendChunk(const KernelTable& table, const AttentionShape& shape, const QueryBlock& block,
                 KvBuffer k_cache, KvBuffer v_cache, const int32_t* kv_slots, int64_t key_begin,
                 int64_t key_end, float* m, float* l, float* acc) {
  AttendChunkHeads(table, shape, &block, 1, k_cache, v_cache, kv_slots, key_begin, key_end, &m, &l,
                   &acc);
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

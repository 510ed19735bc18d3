#include "model/paged_attention.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"

namespace radixserve::model {

BatchLayout BatchLayout::Build(const ForwardBatch& batch, int64_t num_slots) {
  BatchLayout layout;
  const int64_t n = batch.num_tokens();
  RADIX_CHECK(static_cast<int64_t>(batch.positions.size()) == n);
  layout.token_seq.reserve(static_cast<size_t>(n));
  layout.token_kv_pos.reserve(static_cast<size_t>(n));
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const SequenceExtend& seq = batch.sequences[s];
    RADIX_CHECK(seq.prefix_len >= 0 && seq.extend_len >= 0);
    RADIX_CHECK(static_cast<int64_t>(seq.kv_slots.size()) >= seq.prefix_len + seq.extend_len);
    for (int64_t j = 0; j < seq.prefix_len + seq.extend_len; ++j) {
      RADIX_CHECK(seq.kv_slots[static_cast<size_t>(j)] >= 0 &&
                  seq.kv_slots[static_cast<size_t>(j)] < num_slots);
    }
    for (int64_t i = 0; i < seq.extend_len; ++i) {
      layout.token_seq.push_back(static_cast<int32_t>(s));
      layout.token_kv_pos.push_back(seq.prefix_len + i);
    }
  }
  RADIX_CHECK(static_cast<int64_t>(layout.token_seq.size()) == n);
  for (int64_t idx : batch.logit_indices) RADIX_CHECK(idx >= 0 && idx < n);
  return layout;
}

void PagedAttention(const kernels::KernelTable& table, ThreadPool* pool, const ForwardBatch& batch,
                    const BatchLayout& layout, const kernels::AttentionShape& shape,
                    int64_t sliding_window, const float* q, const float* k, const float* v,
                    float* k_cache, float* v_cache, float* out) {
  const int64_t n = batch.num_tokens();
  const int64_t kv_width = static_cast<int64_t>(shape.num_kv_heads) * shape.head_dim;
  const int64_t q_width = static_cast<int64_t>(shape.num_heads) * shape.head_dim;
  for (int64_t t = 0; t < n; ++t) {
    const SequenceExtend& seq =
        batch.sequences[static_cast<size_t>(layout.token_seq[static_cast<size_t>(t)])];
    const int64_t slot =
        seq.kv_slots[static_cast<size_t>(layout.token_kv_pos[static_cast<size_t>(t)])];
    std::memcpy(k_cache + slot * kv_width, k + t * kv_width,
                sizeof(float) * static_cast<size_t>(kv_width));
    std::memcpy(v_cache + slot * kv_width, v + t * kv_width,
                sizeof(float) * static_cast<size_t>(kv_width));
  }
  const int group = shape.num_heads / shape.num_kv_heads;
  auto run = [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / shape.num_heads;
      const int head = static_cast<int>(item % shape.num_heads);
      const SequenceExtend& seq =
          batch.sequences[static_cast<size_t>(layout.token_seq[static_cast<size_t>(t)])];
      const int64_t last = layout.token_kv_pos[static_cast<size_t>(t)];
      const int64_t first =
          sliding_window > 0 ? std::max<int64_t>(0, last - sliding_window + 1) : 0;
      if (static_cast<int64_t>(scores.size()) < last - first + 1)
        scores.resize(static_cast<size_t>(last - first + 1));
      kernels::AttendOneHead(
          table, shape, q + t * q_width + static_cast<int64_t>(head) * shape.head_dim, head / group,
          k_cache, v_cache, seq.kv_slots.data(), first, last, scores.data(),
          out + t * q_width + static_cast<int64_t>(head) * shape.head_dim);
    }
  };
  if (pool == nullptr) {
    run(0, n * shape.num_heads);
  } else {
    pool->ParallelFor(n * shape.num_heads, 4, run);
  }
}

}  // namespace radixserve::model

// PagedAttention: the attention step of one layer over a ForwardBatch. Stores the new tokens'
// K/V into their KV slots, then lets every query head of every token attend causally to its
// sequence's keys (prefix and the new tokens up to itself), optionally within a sliding window.
#pragma once

#include <cstdint>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/kernel_table.h"
#include "model/forward_batch.h"

namespace radixserve::model {

// Per token: its sequence and its position in that sequence's KV (prefix_len + i).
struct BatchLayout {
  std::vector<int32_t> token_seq;
  std::vector<int64_t> token_kv_pos;

  // Checks the batch's internal consistency against the KV pool size (RADIX_CHECK).
  static BatchLayout Build(const ForwardBatch& batch, int64_t num_slots);
};

// q: [T, num_heads * head_dim]; k, v: [T, num_kv_heads * head_dim]; out like q.
// sliding_window 0 means unlimited.
void PagedAttention(const kernels::KernelTable& table, ThreadPool* pool, const ForwardBatch& batch,
                    const BatchLayout& layout, const kernels::AttentionShape& shape,
                    int64_t sliding_window, const float* q, const float* k, const float* v,
                    float* k_cache, float* v_cache, float* out);

}  // namespace radixserve::model

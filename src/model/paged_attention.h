// PagedAttention: the attention step of one layer over a ForwardBatch. Stores the new tokens'
// K/V into their KV slots (converted to the cache's element type), then lets every query head of
// every token attend causally to its sequence's keys (prefix and the new tokens up to itself),
// optionally within a sliding window. A speculative tree token attends to its own path instead
// (SequenceExtend::tree_parents): the keys before the tree, then its ancestors and itself, read
// in the order and chunking a one-token decode at the end of that path would read them, so its
// output is bit-identical to that decode's.
//
// Work items are (sequence, block of up to kQueryBlockTokens tokens, chunk of kernels::kKeyChunk
// key positions) over all KV heads - or over one KV head each when there would otherwise be fewer
// items than twice the pool size - spread over the pool, so a single long sequence still keeps
// every thread busy; the chunks' partial softmax states are then merged in chunk order. A token's
// output is bit-identical whatever the batch composition, prefill chunking or thread count.
//
// Thread affinity: called by the thread that owns `pool` (the engine thread); writes the new
// tokens' KV slots and `out` only.
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
  // Where each token's attention reads: keys at positions [0, token_attend_pos] through the slot
  // list token_view names (-1: its sequence's kv_slots; else views[token_view]). Equal to
  // token_kv_pos and -1 except for tree-draft tokens off their sequence's first path
  // (SequenceExtend::tree_parents), which see their own path as if it were the sequence.
  std::vector<int64_t> token_attend_pos;
  std::vector<int32_t> token_view;
  std::vector<std::vector<int32_t>> views;

  // Checks the batch's internal consistency against the KV pool size (RADIX_CHECK).
  static BatchLayout Build(const ForwardBatch& batch, int64_t num_slots);
};

// q: [T, num_heads * head_dim]; k, v: [T, num_kv_heads * head_dim]; out like q. k_cache and
// v_cache may be one buffer (MLA: the values are a prefix of the keys; v is not stored then).
// sliding_window 0 means unlimited. sinks (null: none): one attention-sink logit per query head
// (gpt-oss), added to each query's softmax denominator (kernels::MergeChunks).
void PagedAttention(const kernels::KernelTable& table, ThreadPool* pool, const ForwardBatch& batch,
                    const BatchLayout& layout, const kernels::AttentionShape& shape,
                    int64_t sliding_window, const float* q, const float* k, const float* v,
                    kernels::KvBuffer k_cache, kernels::KvBuffer v_cache, float* out,
                    const float* sinks = nullptr);

// Tokens of one sequence whose queries share each K/V row load.
inline constexpr int64_t kQueryBlockTokens = 16;

}  // namespace radixserve::model

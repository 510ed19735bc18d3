// Attention of one query head over keys and values held in a paged KV pool.
//
// KV layout (shared with src/kv): per layer one K and one V buffer of float32, [slots, kv_heads,
// head_dim], contiguous per slot. A sequence's key at position j lives in slot kv_slots[j].
#pragma once

#include <cstdint>

#include "kernels/kernel_table.h"

namespace radixserve::kernels {

struct AttentionShape {
  int num_heads = 0;
  int num_kv_heads = 0;  // divides num_heads (GQA)
  int head_dim = 0;
  float scale = 1.0f;    // multiplies q.k
  float softcap = 0.0f;  // > 0: scores = softcap * tanh(scores / softcap)
};

// out[head_dim] = softmax_j(scale * q.k_j) v_j over key positions j in [first, last], where
// K/V of position j are at slot kv_slots[j] (head kv_head). scores must hold last - first + 1
// floats of scratch.
void AttendOneHead(const KernelTable& table, const AttentionShape& shape, const float* q,
                   int kv_head, const float* k_cache, const float* v_cache, const int32_t* kv_slots,
                   int64_t first, int64_t last, float* scores, float* out);

}  // namespace radixserve::kernels

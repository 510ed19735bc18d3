// MlaAttention: one layer of DeepSeek-V2/V3's multi-head latent attention, in the absorbed form
// llama.cpp and SGLang's MLA kernels run (ModelConfig::Mla for the shapes).
//
// Per token: q = W_qb(norm(W_qa h)) (or W_q h without a Q LoRA rank), each head
// [q_nope | q_pe]; [c | k_pe] = W_kva h, c normed, k_pe rotated. The cache keeps [c | k_pe] (one
// row of kv_lora_rank + qk_rope_head_dim per token, no per-head keys or values). Each head's
// q_nope is absorbed into the latent space, q_lat = W_kb^T q_nope, so its score against a cached
// row is [q_lat | q_pe] . [c | k_pe] - attention with one KV head of the row's width whose values
// are the rows' first kv_lora_rank entries. The head's latent output o goes up through W_vb
// (v_head_dim) and the heads through W_o.
//
// Weights: GGUF attn_q / attn_q_a / attn_q_a_norm / attn_q_b, attn_kv_a_mqa, attn_kv_a_norm,
// attn_output, and the per-head absorption matrices attn_k_b ([heads, kv_lora_rank, qk_nope], as
// llama.cpp's converter writes them) and attn_v_b ([heads, v_head_dim, kv_lora_rank]); files
// and HF checkpoints with the unsplit attn_kv_b (kv_b_proj: per head qk_nope rows of keys then
// v_head_dim rows of values) are split and transposed into float32 matrices at load.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/kernel_table.h"
#include "kernels/quant_matmul.h"
#include "kernels/rope.h"
#include "model/forward_batch.h"
#include "model/lora_adapter.h"
#include "model/model_config.h"
#include "model/moe_ffn.h"
#include "model/paged_attention.h"
#include "model/weight_store.h"

namespace radixserve::model {

struct ForwardScratch;

class MlaAttention {
 public:
  using PackFn = MoeFfn::PackFn;

  // What one step's layers share.
  struct Step {
    const kernels::KernelTable* kt;
    ThreadPool* pool;
    const ForwardBatch* batch;
    const BatchLayout* layout;
    ForwardScratch* s;
    const float* rope_cos;  // [T, qk_rope_head_dim / 2]
    const float* rope_sin;
    kernels::ActivationMode mode;
    // The step's adapted rows (null: none) and this layer's index in the adapters.
    const LoraRows* lora = nullptr;
    int64_t layer = 0;
  };

  // Reads the layer's tensors under `prefix` ("blk.N."). `shape` is the attention over the
  // cached rows (num_heads, 1 KV head, kv_lora_rank + qk_rope_head_dim, the softmax scale).
  // Under tensor parallelism (config.tensor_shard) only this rank's query heads are kept (their
  // Q rows, absorption matrices and o_proj columns, cut by `columns`); `shape` counts those.
  Status Load(const ModelConfig& config, const std::string& prefix, WeightStore& weights,
              const PackFn& pack, const MoeFfn::ColumnsFn& columns,
              const kernels::AttentionShape& shape, kernels::RopeLayout rope_layout);

  // out[T, hidden] = attention(h[T, hidden]) over `cache` (the layer's K buffer: values are a
  // prefix of its rows); out may alias h. Under tensor parallelism: this rank's heads' part of
  // o_proj's output, to be summed over the ranks. With step.lora, each adapted row adds its
  // adapter's updates of q / q_a / q_b / kv_a / o to those projections' outputs, and kv_b's in
  // the absorbed form (KvBLora).
  void Forward(const Step& step, int64_t tokens, const float* h, kernels::KvBuffer cache,
               float* out) const;

 private:
  // For each head: rows [t] of `in` (head h's `in_width` values at in + t * in_stride + h *
  // in_head) times matrix `w[h]`, written at out + t * out_stride + h * out_head. Steps whose
  // heads' rows fit in kHeadJobsMaxFloats run the heads as parallel jobs, larger ones one head
  // after the other with each MatMul parallel.
  static constexpr int64_t kHeadJobsMaxFloats = int64_t{1} << 22;
  void PerHead(const Step& step, int64_t tokens, const std::vector<kernels::PackedWeight>& w,
               const float* in, int64_t in_stride, int64_t in_head, int64_t in_width, float* out,
               int64_t out_stride, int64_t out_head) const;

  // kv_b_proj's update scale * B A for the adapted rows, without forming per-head keys or values.
  // A head's keys k = W_kb c gain scale B_k A c, so its score q_nope . k gains
  // (scale A^T B_k^T q_nope) . c: added to the absorbed query q_lat (keys = true). Its values gain
  // scale B_v A c, and by linearity its output scale B_v A o_lat: added to `values` after the
  // latent output o_lat goes up through W_vb (keys = false).
  void KvBLora(const Step& step, bool keys, const float* q, float* q_abs, const float* attn,
               float* values) const;

  int64_t heads_ = 0,  // this rank's
      nope_ = 0, rope_ = 0, v_dim_ = 0, kv_rank_ = 0, q_rank_ = 0, hidden_ = 0;
  float eps_ = 1e-6f;
  kernels::AttentionShape shape_;
  kernels::RopeLayout rope_layout_ = kernels::RopeLayout::kInterleaved;
  kernels::PackedWeight q_, q_a_, q_b_, kv_a_, o_;
  std::vector<float> q_a_norm_, kv_a_norm_;
  std::vector<kernels::PackedWeight> k_b_, v_b_;  // per head: [kv_lora, nope], [v_dim, kv_lora]
  // The float32 absorption matrices split from attn_kv_b (shared: Layer copies stay valid).
  std::shared_ptr<const std::vector<float>> owned_;
};

}  // namespace radixserve::model

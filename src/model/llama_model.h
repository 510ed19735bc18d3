// LlamaModel: LlamaForCausalLM (Llama 2/3, SmolLM2, TinyLlama, Mistral-style dense) and its
// close relatives that differ only in switches: Qwen2 (bias on Q/K/V) and Qwen3 (RMSNorm on each
// Q and K head before RoPE). Pre-norm decoder: RMSNorm -> attention (GQA, RoPE) -> residual ->
// RMSNorm -> SiLU-gated MLP -> residual; final RMSNorm; LM head (tied to the embedding or not).
#pragma once

#include <memory>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/rope.h"
#include "model/causal_lm.h"
#include "model/weight_store.h"

namespace radixserve::model {

struct LlamaVariant {
  bool qkv_bias = false;  // Qwen2
  bool qk_norm = false;   // Qwen3
};

class LlamaModel final : public CausalLM {
 public:
  static Expected<std::unique_ptr<CausalLM>> Create(ModelConfig config,
                                                    std::unique_ptr<WeightStore> weights,
                                                    LlamaVariant variant);

  const ModelConfig& config() const override { return config_; }
  int64_t weight_bytes() const override { return weights_->used_bytes(); }
  Status Forward(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool,
                 float* logits) const override;

 private:
  struct Layer {
    std::vector<float> attn_norm, ffn_norm;
    kernels::WeightMatrix q, k, v, o, gate, up, down;
    std::vector<float> q_bias, k_bias, v_bias;  // Qwen2
    std::vector<float> q_norm, k_norm;          // Qwen3, [head_dim]
  };

  LlamaModel(ModelConfig config, std::unique_ptr<WeightStore> weights, LlamaVariant variant)
      : config_(std::move(config)), weights_(std::move(weights)), variant_(variant) {}
  Status Load();

  ModelConfig config_;
  std::unique_ptr<WeightStore> weights_;
  LlamaVariant variant_;
  kernels::RopeLayout rope_layout_ = kernels::RopeLayout::kRotateHalf;
  std::vector<float> inv_freq_;
  kernels::WeightMatrix embedding_, lm_head_;
  std::vector<float> output_norm_;
  std::vector<Layer> layers_;
};

}  // namespace radixserve::model

// LlamaModel: LlamaForCausalLM (Llama 2/3, SmolLM2, TinyLlama, Mistral-style dense) and its
// close relatives that differ only in switches: Qwen2 (bias on Q/K/V), Qwen3 (RMSNorm on each
// Q and K head before RoPE), and their mixture-of-experts forms (moe_ffn.h): Mixtral, Qwen2-MoE
// (with a shared expert), Qwen3-MoE and OLMoE (RMSNorm over the whole Q and K projections), and
// gpt-oss (attention sinks, biases everywhere, alternating sliding-window layers, MoE with the
// top-k-softmax router and clamped SwiGLU experts: moe_ffn.h).
// Pre-norm decoder: RMSNorm -> attention (GQA, RoPE) -> residual -> RMSNorm -> SiLU-gated MLP
// -> residual; final RMSNorm; LM head (tied to the embedding or not).
#pragma once

#include <memory>
#include <vector>

#include "model/causal_lm.h"
#include "model/decoder_stack.h"
#include "model/weight_store.h"

namespace radixserve::model {

struct LlamaVariant {
  bool qkv_bias = false;      // Qwen2
  bool qk_norm = false;       // Qwen3
  bool moe = false;           // mixture-of-experts MLP in every layer (moe_ffn.h)
  bool qk_norm_full = false;  // OLMoE: QK-norm over the whole Q and K projections
  // OLMo 2: no input norms; RMSNorm on the attention's and the MLP's outputs instead.
  bool post_norms_only = false;
  bool gate_up_in_up = false;  // Phi-3: ffn_up holds [gate; up]
  // gpt-oss: biases on Q/K/V and the output projection, a sink per head, the MLP's input norm
  // named post_attention_norm, every other layer sliding (config), YaRN on every layer.
  bool gpt_oss = false;
  // DeepSeek-V2/V3: multi-head latent attention (mla_attention.h); leading dense layers.
  bool mla = false;
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
  Status ForwardHidden(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool,
                       float* hidden) const override {
    return stack_.ForwardHidden(batch, kv, pool, hidden);
  }
  Status ForwardWithHidden(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool,
                           float* logits, float* hidden) const override {
    return stack_.Forward(batch, kv, pool, logits, hidden);
  }
  Status ForwardMtp(const ForwardBatch& batch, const float* h_in, const KvCacheView& kv,
                    ThreadPool* pool, float* logits, float* h_out) const override {
    return stack_.ForwardMtp(batch, h_in, kv, pool, logits, h_out);
  }
  Expected<WeightRows> ReadWeight(const std::string& hf_name, int64_t max_rows) const override;
  Expected<std::shared_ptr<const LoraAdapter>> LoadLora(const std::string& path,
                                                        LoraLoadOptions options) const override {
    return stack_.LoadLora(path, std::move(options));
  }

 private:
  LlamaModel(ModelConfig config, std::unique_ptr<WeightStore> weights, LlamaVariant variant)
      : config_(std::move(config)), weights_(std::move(weights)), variant_(variant) {}
  Status Load();

  ModelConfig config_;
  std::unique_ptr<WeightStore> weights_;
  LlamaVariant variant_;
  DecoderStack stack_;
};

}  // namespace radixserve::model

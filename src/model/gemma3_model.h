// Gemma3Model: Gemma3ForCausalLM, text only. Differences from Llama: embeddings scaled by
// sqrt(hidden); RMSNorm multiplies by (1 + w) (GGUF files already store 1 + w); RMSNorm on each
// Q/K head; norms after attention and after the MLP as well as before; GELU(tanh)-gated MLP;
// sliding-window layers (local RoPE base) interleaved with global layers (global RoPE base and
// scaling); attention scale 1/sqrt(query_pre_attn_scalar); optional final logit soft-capping.
#pragma once

#include <memory>
#include <vector>

#include "kernels/matmul.h"
#include "model/causal_lm.h"
#include "model/weight_store.h"

namespace radixserve::model {

class Gemma3Model final : public CausalLM {
 public:
  static Expected<std::unique_ptr<CausalLM>> Create(ModelConfig config,
                                                    std::unique_ptr<WeightStore> weights);

  const ModelConfig& config() const override { return config_; }
  int64_t weight_bytes() const override { return weights_->used_bytes(); }
  Status Forward(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool,
                 float* logits) const override;

 private:
  struct Layer {
    std::vector<float> attn_norm, post_attn_norm, ffn_norm, post_ffn_norm, q_norm, k_norm;
    kernels::WeightMatrix q, k, v, o, gate, up, down;
    bool sliding = false;
  };

  Gemma3Model(ModelConfig config, std::unique_ptr<WeightStore> weights)
      : config_(std::move(config)), weights_(std::move(weights)) {}
  Status Load();

  ModelConfig config_;
  std::unique_ptr<WeightStore> weights_;
  float norm_offset_ = 1.0f;  // 0 when the checkpoint stores 1 + w
  std::vector<float> inv_freq_global_, inv_freq_local_;
  kernels::WeightMatrix embedding_;
  std::vector<float> output_norm_;
  std::vector<Layer> layers_;
};

}  // namespace radixserve::model

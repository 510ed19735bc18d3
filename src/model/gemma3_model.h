// Gemma3Model: Gemma3ForCausalLM, text only. Differences from Llama: embeddings scaled by
// sqrt(hidden); RMSNorm multiplies by (1 + w) (GGUF files already store 1 + w); RMSNorm on each
// Q/K head; norms after attention and after the MLP as well as before; GELU(tanh)-gated MLP;
// sliding-window layers (local RoPE base) interleaved with global layers (global RoPE base and
// scaling); attention scale 1/sqrt(query_pre_attn_scalar); optional final logit soft-capping.
//
// Gemma 2 (Gemma2ForCausalLM, `gemma2: true`) is the same decoder without the Q/K head norms,
// with every other layer sliding (both kinds on the one RoPE base), attention scores soft-capped
// (attn_logit_softcapping) and final logits soft-capped.
#pragma once

#include <memory>
#include <vector>

#include "model/causal_lm.h"
#include "model/decoder_stack.h"
#include "model/weight_store.h"

namespace radixserve::model {

class Gemma3Model final : public CausalLM {
 public:
  static Expected<std::unique_ptr<CausalLM>> Create(ModelConfig config,
                                                    std::unique_ptr<WeightStore> weights,
                                                    bool gemma2 = false);

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
  Expected<std::shared_ptr<const LoraAdapter>> LoadLora(const std::string& path,
                                                        LoraLoadOptions options) const override {
    return stack_.LoadLora(path, std::move(options));
  }

 private:
  Gemma3Model(ModelConfig config, std::unique_ptr<WeightStore> weights, bool gemma2)
      : config_(std::move(config)), weights_(std::move(weights)), gemma2_(gemma2) {}
  Status Load();

  ModelConfig config_;
  std::unique_ptr<WeightStore> weights_;
  bool gemma2_;
  DecoderStack stack_;
};

}  // namespace radixserve::model

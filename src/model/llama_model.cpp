#include "model/llama_model.h"

#include <cmath>

#include "common/status.h"

namespace radixserve::model {

Expected<std::unique_ptr<CausalLM>> LlamaModel::Create(ModelConfig config,
                                                       std::unique_ptr<WeightStore> weights,
                                                       LlamaVariant variant) {
  std::unique_ptr<LlamaModel> model(new LlamaModel(std::move(config), std::move(weights), variant));
  RADIX_RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<CausalLM>(std::move(model));
}

Status LlamaModel::Load() {
  const ModelConfig& c = config_;
  if (c.hidden_act != "silu") {
    return Unsupported(c.architecture + ": hidden_act '" + c.hidden_act + "' is not supported");
  }
  if (variant_.moe != (c.num_experts > 0)) {
    return InvalidArgument(c.architecture + (variant_.moe ? ": config has no num_experts"
                                                          : ": num_experts is set, but this "
                                                            "architecture has no experts"));
  }
  WeightStore& w = *weights_;
  std::vector<float> freq_factors;
  if (w.Find("rope_freqs.weight") != nullptr) {
    RADIX_ASSIGN_OR_RETURN(freq_factors, w.RequireVector("rope_freqs.weight", c.rotary_dim / 2));
  }
  DecoderSpec spec;
  spec.qkv_bias = variant_.qkv_bias;
  spec.qk_norm = variant_.qk_norm;
  spec.moe = variant_.moe;
  spec.qk_norm_full = variant_.qk_norm_full;
  spec.tie_word_embeddings = c.tie_word_embeddings;
  spec.activation = GatedActivation::kSilu;
  spec.rope_layout = w.rope_layout();
  spec.inv_freq = kernels::RopeInvFreq(c.rope_theta, static_cast<int>(c.rotary_dim),
                                       c.rope_scaling,
                                       freq_factors.empty() ? nullptr : freq_factors.data());
  spec.rope_attention_factor = static_cast<float>(kernels::RopeAttentionFactor(c.rope_scaling));
  spec.attention = {static_cast<int>(c.num_heads), static_cast<int>(c.num_kv_heads),
                    static_cast<int>(c.head_dim),
                    1.0f / std::sqrt(static_cast<float>(c.head_dim)), 0.0f};
  return stack_.Load(c, std::move(spec), w);
}

Status LlamaModel::Forward(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool,
                           float* logits) const {
  return stack_.Forward(batch, kv, pool, logits);
}

}  // namespace radixserve::model

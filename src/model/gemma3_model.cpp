#include "model/gemma3_model.h"

#include <cmath>

namespace radixserve::model {

Expected<std::unique_ptr<CausalLM>> Gemma3Model::Create(ModelConfig config,
                                                        std::unique_ptr<WeightStore> weights,
                                                        bool gemma2) {
  std::unique_ptr<Gemma3Model> model(
      new Gemma3Model(std::move(config), std::move(weights), gemma2));
  RADIX_RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<CausalLM>(std::move(model));
}

Status Gemma3Model::Load() {
  const ModelConfig& c = config_;
  if (c.hidden_act != "gelu_pytorch_tanh" && c.hidden_act != "gelu_tanh" &&
      c.hidden_act != "gelu") {
    return Unsupported(c.architecture + ": hidden_activation '" + c.hidden_act +
                       "' is not supported");
  }
  WeightStore& w = *weights_;
  if (w.Find("output.weight") != nullptr) {
    return Unsupported(w.description() + ": Gemma with an untied output.weight is not supported");
  }
  const int rot = static_cast<int>(c.rotary_dim);
  DecoderSpec spec;
  spec.norm_offset = w.from_gguf() ? 0.0f : 1.0f;  // GGUF norms already hold 1 + w
  spec.embed_scale = std::sqrt(static_cast<float>(c.hidden_size));
  spec.qk_norm = !gemma2_;
  spec.sandwich_norms = true;
  spec.tie_word_embeddings = true;
  spec.activation = GatedActivation::kGeluTanh;
  spec.rope_layout = kernels::RopeLayout::kRotateHalf;
  spec.inv_freq = kernels::RopeInvFreq(c.rope_theta, rot, c.rope_scaling);
  spec.rope_attention_factor = static_cast<float>(kernels::RopeAttentionFactor(c.rope_scaling));
  spec.sliding_window_layers = true;
  spec.inv_freq_local = gemma2_ ? spec.inv_freq : kernels::RopeInvFreq(c.rope_local_theta, rot, {});
  const double scalar =
      c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : static_cast<double>(c.head_dim);
  spec.attention = {static_cast<int>(c.num_heads), static_cast<int>(c.num_kv_heads),
                    static_cast<int>(c.head_dim), static_cast<float>(1.0 / std::sqrt(scalar)),
                    static_cast<float>(c.attn_logit_softcapping)};
  spec.final_logit_softcap = static_cast<float>(c.final_logit_softcapping);
  RADIX_RETURN_IF_ERROR(stack_.Load(c, std::move(spec), w));
  config_ = stack_.config();  // a tensor-parallel shard's head and MLP sizes
  return Status::Ok();
}

Status Gemma3Model::Forward(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool,
                            float* logits) const {
  return stack_.Forward(batch, kv, pool, logits);
}

}  // namespace radixserve::model

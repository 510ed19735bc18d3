#include "model/llama_model.h"

#include <algorithm>
#include <cmath>

#include "common/status.h"
#include "kernels/matmul.h"

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
  if (c.hidden_act != "silu" && !variant_.gpt_oss) {
    return Unsupported(c.architecture + ": hidden_act '" + c.hidden_act + "' is not supported");
  }
  if (variant_.moe != (c.num_experts > 0)) {
    return InvalidArgument(c.architecture + (variant_.moe ? ": config has no num_experts"
                                                          : ": num_experts is set, but this "
                                                            "architecture has no experts"));
  }
  if (variant_.post_norms_only && c.sliding_window > 0) {
    // OLMo 3 (written as olmo2 GGUF files) interleaves sliding-window layers.
    return Unsupported(c.architecture +
                       ": sliding-window attention layers (OLMo 3) are not "
                       "supported");
  }
  WeightStore& w = *weights_;
  std::vector<float> freq_factors;
  if (w.Find("rope_freqs.weight") != nullptr) {
    RADIX_ASSIGN_OR_RETURN(freq_factors, w.RequireVector("rope_freqs.weight", c.rotary_dim / 2));
  }
  // LongRoPE: the long factors when the context exceeds the original one (llama.cpp's rule at
  // its default context), from the config (HF) or the file's tensors (GGUF).
  const bool long_rope =
      c.rope_original_max_position > 0 && c.context_length > c.rope_original_max_position;
  if (!c.rope_long_factor.empty()) {
    freq_factors = long_rope ? c.rope_long_factor : c.rope_short_factor;
  } else if (w.Find("rope_factors_long.weight") != nullptr) {
    const char* name = long_rope ? "rope_factors_long.weight" : "rope_factors_short.weight";
    RADIX_ASSIGN_OR_RETURN(freq_factors, w.RequireVector(name, c.rotary_dim / 2));
  }
  DecoderSpec spec;
  spec.qkv_bias = variant_.qkv_bias;
  spec.qk_norm = variant_.qk_norm;
  spec.moe = variant_.moe;
  spec.qk_norm_full = variant_.qk_norm_full;
  spec.pre_norms = !variant_.post_norms_only;
  spec.sandwich_norms = variant_.post_norms_only;
  spec.gate_up_in_up = variant_.gate_up_in_up;
  // Mistral's sliding window (v0.1: 4096), as transformers applies it to every layer of an HF
  // checkpoint; llama.cpp runs Mistral GGUFs (arch llama) without one, and so do we.
  if (c.architecture == "MistralForCausalLM" && !w.from_gguf() && c.sliding_window > 0) {
    spec.sliding_window_layers = true;
  }
  if (variant_.gpt_oss) {
    spec.qkv_bias = true;
    spec.output_bias = true;
    spec.attention_sinks = true;
    spec.ffn_norm_tensor = "post_attention_norm";
    // Sliding layers use the global rotary tables (inv_freq_local stays empty).
    spec.sliding_window_layers = c.sliding_window > 0;
  }
  if (variant_.mla != c.mla.enabled()) {
    return InvalidArgument(c.architecture +
                           ": config has no kv_lora_rank (multi-head latent "
                           "attention)");
  }
  spec.mla = variant_.mla;
  spec.tie_word_embeddings = c.tie_word_embeddings;
  spec.activation = GatedActivation::kSilu;
  spec.rope_layout = w.rope_layout();
  spec.inv_freq = kernels::RopeInvFreq(c.rope_theta, static_cast<int>(c.rotary_dim), c.rope_scaling,
                                       freq_factors.empty() ? nullptr : freq_factors.data());
  spec.rope_attention_factor =
      static_cast<float>(kernels::RopeAttentionFactor(c.rope_scaling) * c.rope_factor_attention);
  const float scale = c.attention_multiplier > 0 ? static_cast<float>(c.attention_multiplier)
                                                 : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  spec.attention = {static_cast<int>(c.num_heads), static_cast<int>(c.num_kv_heads),
                    static_cast<int>(c.head_dim), scale, 0.0f};
  if (spec.mla) {
    // DeepSeek's rotary layout; the softmax scale of its full query heads (nope + rope), times
    // YaRN's mscale(mscale_all_dim) squared, as transformers and llama.cpp apply it.
    spec.rope_layout = c.mla.rope_interleave ? kernels::RopeLayout::kInterleaved
                                             : kernels::RopeLayout::kRotateHalf;
    const kernels::RopeScaling& rs = c.rope_scaling;
    double mscale = 1.0;
    if (rs.type == kernels::RopeScalingType::kYarn && rs.mscale_all_dim > 0 && rs.factor > 1) {
      mscale = 0.1 * rs.mscale_all_dim * std::log(rs.factor) + 1.0;
    }
    spec.attention.scale = static_cast<float>(
        mscale * mscale /
        std::sqrt(static_cast<double>(c.mla.qk_nope_head_dim + c.mla.qk_rope_head_dim)));
  }
  // Granite's scalings (1 elsewhere).
  spec.embed_scale = static_cast<float>(c.embedding_multiplier);
  spec.residual_scale = static_cast<float>(c.residual_multiplier);
  spec.logit_scale = static_cast<float>(c.logits_scaling);
  RADIX_RETURN_IF_ERROR(stack_.Load(c, std::move(spec), w));
  config_ = stack_.config();  // a tensor-parallel shard's head and MLP sizes
  return Status::Ok();
}

Status LlamaModel::Forward(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool,
                           float* logits) const {
  return stack_.Forward(batch, kv, pool, logits);
}

Expected<CausalLM::WeightRows> LlamaModel::ReadWeight(const std::string& hf_name,
                                                      int64_t max_rows) const {
  std::string name = hf_name;
  if (name == "lm_head.weight" && weights_->Find("output.weight") == nullptr &&
      config_.tie_word_embeddings) {
    name = "model.embed_tokens.weight";
  }
  const std::string canonical = CanonicalWeightName(name, config_.model_type);
  const WeightTensor* tensor = canonical.empty() ? nullptr : weights_->Find(canonical);
  if (tensor == nullptr) return NotFound("no parameter named '" + hf_name + "'");
  if (tensor->shape.empty() || tensor->shape.size() > 2) {
    return Unsupported("parameter '" + hf_name + "' is not a matrix or a vector");
  }
  const bool one_dim = tensor->shape.size() == 1;
  const int64_t rows = one_dim ? 1 : tensor->shape[0];
  const int64_t cols = one_dim ? tensor->shape[0] : tensor->shape[1];
  const kernels::WeightMatrix m{tensor->format, rows, cols, tensor->data};
  // GGUF's llama converter wrote Q and K rows of each head in Meta's interleaved rotary order:
  // HF row (head h, half j, index i) is GGUF row h * d + 2 * i + j.
  const auto ends_with = [&](std::string_view suffix) {
    return canonical.size() >= suffix.size() &&
           canonical.compare(canonical.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  const bool permuted = weights_->rope_layout() == kernels::RopeLayout::kInterleaved &&
                        (ends_with("attn_q.weight") || ends_with("attn_k.weight") ||
                         ends_with("attn_q.bias") || ends_with("attn_k.bias"));
  const int64_t d = config_.head_dim;
  const auto gguf_index = [&](int64_t r) {
    if (!permuted) return r;
    const int64_t h = r / d, rem = r % d, j = rem / (d / 2), i = rem % (d / 2);
    return h * d + 2 * i + j;
  };
  WeightRows out;
  out.one_dim = one_dim;
  if (one_dim) {
    std::vector<float> all(static_cast<size_t>(cols));
    kernels::DequantizeRow(m, 0, all.data());
    std::vector<float> values;
    for (int64_t c = 0; c < std::min(cols, max_rows); ++c) {
      values.push_back(all[static_cast<size_t>(gguf_index(c))]);
    }
    out.rows.push_back(std::move(values));
    return out;
  }
  for (int64_t r = 0; r < std::min(rows, max_rows); ++r) {
    std::vector<float> row(static_cast<size_t>(cols));
    kernels::DequantizeRow(m, gguf_index(r), row.data());
    out.rows.push_back(std::move(row));
  }
  return out;
}

}  // namespace radixserve::model

#include "model/model_config.h"

#include <algorithm>
#include <cmath>

#include "model/gguf_file.h"

namespace radixserve::model {
namespace {

using nlohmann::json;

// Reads config[key] as a number if present; errors on a wrong type.
template <typename T>
Status ReadNumber(const json& config, const char* key, T* out, const std::string& source) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return Status::Ok();
  if (!it->is_number()) return InvalidArgument(source + ": " + key + " must be a number");
  *out = it->get<T>();
  return Status::Ok();
}

Status RequirePositive(int64_t value, const char* key, const std::string& source) {
  if (value <= 0) return InvalidArgument(source + ": " + key + " must be a positive integer");
  return Status::Ok();
}

void CollectIds(const json& value, std::vector<int64_t>* out) {
  auto add = [&](int64_t id) {
    for (int64_t e : *out) {
      if (e == id) return;
    }
    out->push_back(id);
  };
  if (value.is_number_integer()) add(value.get<int64_t>());
  if (value.is_array()) {
    for (const auto& v : value) {
      if (v.is_number_integer()) add(v.get<int64_t>());
    }
  }
}

Status ParseRopeScaling(const json& config, ModelConfig* c, const std::string& source) {
  auto it = config.find("rope_scaling");
  // transformers 5 saves the scaling (and rope_theta) as rope_parameters.
  if (it == config.end() || it->is_null()) it = config.find("rope_parameters");
  if (it == config.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return InvalidArgument(source + ": rope_scaling must be an object");
  std::string type = it->value("rope_type", it->value("type", std::string("default")));
  kernels::RopeScaling& s = c->rope_scaling;
  const bool has_factor = it->contains("factor") && !(*it)["factor"].is_null();
  RADIX_RETURN_IF_ERROR(ReadNumber(*it, "factor", &s.factor, source));
  if (type == "default") {
    s.type = kernels::RopeScalingType::kNone;
  } else if (type == "linear") {
    s.type = kernels::RopeScalingType::kLinear;
  } else if (type == "llama3") {
    s.type = kernels::RopeScalingType::kLlama3;
    RADIX_RETURN_IF_ERROR(ReadNumber(*it, "low_freq_factor", &s.low_freq_factor, source));
    RADIX_RETURN_IF_ERROR(ReadNumber(*it, "high_freq_factor", &s.high_freq_factor, source));
    RADIX_RETURN_IF_ERROR(
        ReadNumber(*it, "original_max_position_embeddings", &s.original_max_position, source));
    if (s.high_freq_factor <= s.low_freq_factor) {
      return InvalidArgument(source +
                             ": rope_scaling high_freq_factor must exceed low_freq_factor");
    }
  } else if (type == "yarn") {
    s.type = kernels::RopeScalingType::kYarn;
    s.original_max_position = c->context_length;
    RADIX_RETURN_IF_ERROR(
        ReadNumber(*it, "original_max_position_embeddings", &s.original_max_position, source));
    // Like HF: without a factor, the context extension ratio is the factor.
    if (!has_factor) {
      s.factor = static_cast<double>(c->context_length) /
                 static_cast<double>(std::max<int64_t>(s.original_max_position, 1));
    }
    for (auto [key, field] : {std::pair{"beta_fast", &s.beta_fast},
                              {"beta_slow", &s.beta_slow},
                              {"mscale", &s.mscale},
                              {"mscale_all_dim", &s.mscale_all_dim},
                              {"attention_factor", &s.attention_factor}}) {
      RADIX_RETURN_IF_ERROR(ReadNumber(*it, key, field, source));
    }
    // HF treats 0 / null beta as "use the default".
    if (s.beta_fast == 0) s.beta_fast = 32.0;
    if (s.beta_slow == 0) s.beta_slow = 1.0;
    s.truncate = it->value("truncate", true);
    if (s.original_max_position <= 0 || s.beta_fast <= 0 || s.beta_slow <= 0) {
      return InvalidArgument(source +
                             ": rope_scaling yarn needs positive original_max_position_embeddings, "
                             "beta_fast and beta_slow");
    }
  } else if (type == "longrope" || type == "su") {
    // Divisors, not a scaling type of the kernels: LlamaModel passes the chosen set as the
    // frequency factors.
    const size_t half = static_cast<size_t>(c->rotary_dim / 2);
    for (auto [key, out] : {std::pair{"long_factor", &c->rope_long_factor},
                            {"short_factor", &c->rope_short_factor}}) {
      auto f = it->find(key);
      if (f == it->end() || !f->is_array() || f->size() != half) {
        return InvalidArgument(source + ": rope_scaling " + type + " needs " + key + " with " +
                               std::to_string(half) + " entries (rotary_dim / 2)");
      }
      for (const json& v : *f) {
        if (!v.is_number() || !(v.get<double>() > 0)) {
          return InvalidArgument(source + ": rope_scaling " + key + " entries must be positive");
        }
        out->push_back(v.get<float>());
      }
    }
    c->rope_original_max_position = c->context_length;
    RADIX_RETURN_IF_ERROR(ReadNumber(config, "original_max_position_embeddings",
                                     &c->rope_original_max_position, source));
    RADIX_RETURN_IF_ERROR(ReadNumber(*it, "original_max_position_embeddings",
                                     &c->rope_original_max_position, source));
    if (c->rope_original_max_position <= 0) {
      return InvalidArgument(source + ": original_max_position_embeddings must be positive");
    }
    // transformers' rule: sqrt(1 + ln(factor) / ln(original)) for a context factor > 1.
    const double factor =
        static_cast<double>(c->context_length) / static_cast<double>(c->rope_original_max_position);
    c->rope_factor_attention =
        factor <= 1.0
            ? 1.0
            : std::sqrt(1.0 + std::log(factor) /
                                  std::log(static_cast<double>(c->rope_original_max_position)));
    RADIX_RETURN_IF_ERROR(ReadNumber(*it, "attention_factor", &c->rope_factor_attention, source));
    s.type = kernels::RopeScalingType::kNone;
    s.factor = 1.0;
  } else {
    return Unsupported(source + ": rope_scaling type '" + type + "' is not supported yet");
  }
  if (!(s.factor > 0)) return InvalidArgument(source + ": rope_scaling factor must be positive");
  return Status::Ok();
}

// DeepSeek-V2/V3's MoE keys: n_shared_experts (ungated), routed_scaling_factor,
// first_k_dense_replace, scoring_func, topk_method with n_group / topk_group.
Status ParseDeepseekRouting(const json& cfg, ModelConfig* c, const std::string& source) {
  int64_t shared = 0, layer_freq = 1;
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "n_shared_experts", &shared, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "moe_layer_freq", &layer_freq, source));
  RADIX_RETURN_IF_ERROR(
      ReadNumber(cfg, "routed_scaling_factor", &c->routed_scaling_factor, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "first_k_dense_replace", &c->first_dense_layers, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "num_nextn_predict_layers", &c->nextn_layers, source));
  if (c->nextn_layers < 0) {
    return InvalidArgument(source + ": num_nextn_predict_layers must not be negative");
  }
  if (shared < 0) return InvalidArgument(source + ": n_shared_experts must not be negative");
  if (layer_freq != 1) {
    return Unsupported(source + ": moe_layer_freq " + std::to_string(layer_freq) +
                       " (dense layers between the sparse ones) is not supported yet");
  }
  if (c->first_dense_layers < 0) {
    return InvalidArgument(source + ": first_k_dense_replace must not be negative");
  }
  if (!(c->routed_scaling_factor > 0)) {
    return InvalidArgument(source + ": routed_scaling_factor must be positive");
  }
  c->shared_expert_intermediate_size = shared * c->moe_intermediate_size;
  c->shared_expert_gated = false;
  const auto text = [&](const char* key, const char* fallback) {
    return cfg.contains(key) && cfg[key].is_string() ? cfg[key].get<std::string>()
                                                     : std::string(fallback);
  };
  const std::string scoring = text("scoring_func", "softmax");
  if (scoring == "sigmoid") {
    c->moe_gating = ModelConfig::MoeGating::kSigmoid;
  } else if (scoring != "softmax") {
    return Unsupported(source + ": scoring_func '" + scoring + "' is not supported");
  }
  const std::string method = text("topk_method", scoring == "sigmoid" ? "noaux_tc" : "greedy");
  if (method == "group_limited_greedy") {
    c->group_score = ModelConfig::MoeGroupScore::kMax;
  } else if (method == "noaux_tc") {
    c->group_score = ModelConfig::MoeGroupScore::kTopTwoSum;
  } else if (method != "greedy") {
    return Unsupported(source + ": topk_method '" + method + "' is not supported");
  }
  if (method != "greedy") {
    RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "n_group", &c->expert_groups, source));
    RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "topk_group", &c->expert_groups_used, source));
  }
  const int64_t groups = c->expert_groups, used = c->expert_groups_used;
  if (groups < 1 || c->num_experts % groups != 0 || used < 1 || used > groups ||
      c->num_experts_per_tok > used * (c->num_experts / groups) ||
      (groups > 1 && c->group_score == ModelConfig::MoeGroupScore::kTopTwoSum &&
       c->num_experts / groups < 2)) {
    return InvalidArgument(source + ": n_group " + std::to_string(groups) + " / topk_group " +
                           std::to_string(used) + " cannot route " +
                           std::to_string(c->num_experts_per_tok) + " of " +
                           std::to_string(c->num_experts) + " experts");
  }
  return Status::Ok();
}

// Multi-head latent attention (DeepSeek-V2/V3 configs with kv_lora_rank): the MLA shape, and the
// KV geometry of its compressed rows (ModelConfig::Mla).
Status ParseMla(const json& cfg, ModelConfig* c, const std::string& source) {
  if (c->model_type != "deepseek_v2" && c->model_type != "deepseek_v3") return Status::Ok();
  ModelConfig::Mla& m = c->mla;
  for (auto [key, field] : {std::pair{"q_lora_rank", &m.q_lora_rank},
                            {"kv_lora_rank", &m.kv_lora_rank},
                            {"qk_nope_head_dim", &m.qk_nope_head_dim},
                            {"qk_rope_head_dim", &m.qk_rope_head_dim},
                            {"v_head_dim", &m.v_head_dim}}) {
    RADIX_RETURN_IF_ERROR(ReadNumber(cfg, key, field, source));
  }
  if (m.q_lora_rank < 0 || m.kv_lora_rank <= 0 || m.qk_nope_head_dim <= 0 ||
      m.qk_rope_head_dim <= 0 || m.qk_rope_head_dim % 2 != 0 || m.v_head_dim <= 0) {
    return InvalidArgument(source +
                           ": multi-head latent attention needs positive kv_lora_rank, "
                           "qk_nope_head_dim, v_head_dim, an even positive qk_rope_head_dim and "
                           "q_lora_rank >= 0");
  }
  if (cfg.contains("rope_interleave") && cfg["rope_interleave"].is_boolean()) {
    m.rope_interleave = cfg["rope_interleave"].get<bool>();
  }
  c->num_kv_heads = 1;
  c->head_dim = m.kv_lora_rank + m.qk_rope_head_dim;
  c->rotary_dim = m.qk_rope_head_dim;
  return Status::Ok();
}

// num_experts (Qwen2/3-MoE, OLMoE) or num_local_experts (Mixtral), num_experts_per_tok,
// moe_intermediate_size, norm_topk_prob. Layouts this build cannot run (dense layers between the
// sparse ones) are refused rather than run as all-sparse.
Status ParseMoe(const json& cfg, ModelConfig* c, const std::string& source) {
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "n_routed_experts", &c->num_experts, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "num_local_experts", &c->num_experts, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "num_experts", &c->num_experts, source));
  if (c->num_experts <= 0) {
    c->num_experts = 0;
    return Status::Ok();
  }
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "num_experts_per_tok", &c->num_experts_per_tok, source));
  RADIX_RETURN_IF_ERROR(
      ReadNumber(cfg, "moe_intermediate_size", &c->moe_intermediate_size, source));
  if (c->moe_intermediate_size == 0) c->moe_intermediate_size = c->intermediate_size;
  if (c->intermediate_size == 0) c->intermediate_size = c->moe_intermediate_size;
  // Mixtral always renormalizes (its config has no switch); Qwen-MoE configs say.
  c->norm_topk_prob = cfg.value("norm_topk_prob", c->architecture == "MixtralForCausalLM");
  if (c->model_type == "gpt_oss") {
    // The original gpt-oss config.json names the top-k experts_per_token.
    RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "experts_per_token", &c->num_experts_per_tok, source));
    RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "num_experts_per_tok", &c->num_experts_per_tok, source));
    c->moe_gating = ModelConfig::MoeGating::kTopKSoftmax;
    c->swiglu_limit = 7.0;
    RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "swiglu_limit", &c->swiglu_limit, source));
    RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "swiglu_alpha", &c->swiglu_alpha, source));
    if (!(c->swiglu_limit > 0)) return InvalidArgument(source + ": swiglu_limit must be positive");
  }
  if (c->num_experts_per_tok <= 0 || c->num_experts_per_tok > c->num_experts) {
    return InvalidArgument(source + ": num_experts_per_tok must be in [1, num_experts]");
  }
  RADIX_RETURN_IF_ERROR(RequirePositive(c->moe_intermediate_size, "moe_intermediate_size", source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "shared_expert_intermediate_size",
                                   &c->shared_expert_intermediate_size, source));
  if (c->shared_expert_intermediate_size < 0) {
    return InvalidArgument(source + ": shared_expert_intermediate_size must not be negative");
  }
  if (c->model_type == "deepseek_v2" || c->model_type == "deepseek_v3") {
    RADIX_RETURN_IF_ERROR(ParseDeepseekRouting(cfg, c, source));
  }
  int64_t sparse_step = 1;
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "decoder_sparse_step", &sparse_step, source));
  const bool dense_layers = cfg.contains("mlp_only_layers") && cfg["mlp_only_layers"].is_array() &&
                            !cfg["mlp_only_layers"].empty();
  if (cfg.contains("clip_qkv") && !cfg["clip_qkv"].is_null()) {
    return Unsupported(source + ": clip_qkv (OLMoE) is not supported yet");
  }
  if (sparse_step != 1 || dense_layers) {
    return Unsupported(source +
                       ": MoE models with dense layers (decoder_sparse_step != 1 or "
                       "mlp_only_layers) are not supported yet");
  }
  return Status::Ok();
}

}  // namespace

int64_t ModelConfig::ParameterCount() const {
  const int64_t H = hidden_size, q = num_heads * head_dim, kv = num_kv_heads * head_dim;
  int64_t attention = H * (q + 2 * kv) + q * H;
  if (mla.enabled()) {
    const int64_t qk = num_heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim);
    attention = (mla.q_lora_rank > 0 ? mla.q_lora_rank * (H + qk) : H * qk) + H * head_dim +
                mla.kv_lora_rank * num_heads * (mla.qk_nope_head_dim + mla.v_head_dim) +
                num_heads * mla.v_head_dim * H;
  }
  const int64_t dense = 3 * H * intermediate_size;
  const int64_t sparse =
      num_experts * (3 * H * moe_intermediate_size + H) + 3 * H * shared_expert_intermediate_size;
  const int64_t dense_layers =
      num_experts > 0 ? std::min(first_dense_layers, num_layers) : num_layers;
  return vocab_size * H * (tie_word_embeddings ? 1 : 2) + num_layers * (attention + 2 * H) +
         dense_layers * dense + (num_layers - dense_layers) * sparse + H;
}

Expected<ModelConfig> ParseModelConfig(const json& config, const json* generation,
                                       const std::string& source) {
  if (!config.is_object()) return InvalidArgument(source + ": config is not a JSON object");
  ModelConfig c;
  // Gemma 3 multimodal configs nest the language model under text_config.
  const json& cfg = config.contains("text_config") && config["text_config"].is_object()
                        ? config["text_config"]
                        : config;
  auto arch_it = config.find("architectures");
  if (arch_it != config.end() && arch_it->is_array() && !arch_it->empty() &&
      (*arch_it)[0].is_string()) {
    c.architecture = (*arch_it)[0].get<std::string>();
  }
  c.model_type = cfg.value("model_type", config.value("model_type", std::string()));
  if (c.architecture.empty()) {
    return InvalidArgument(source + ": config has no \"architectures\" entry");
  }
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "hidden_size", &c.hidden_size, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "intermediate_size", &c.intermediate_size, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "num_hidden_layers", &c.num_layers, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "num_attention_heads", &c.num_heads, source));
  c.num_kv_heads = c.num_heads;
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "num_key_value_heads", &c.num_kv_heads, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "vocab_size", &c.vocab_size, source));
  RADIX_RETURN_IF_ERROR(ParseMoe(cfg, &c, source));
  for (auto [value, key] : {std::pair{c.hidden_size, "hidden_size"},
                            {c.intermediate_size, "intermediate_size"},
                            {c.num_layers, "num_hidden_layers"},
                            {c.num_heads, "num_attention_heads"},
                            {c.num_kv_heads, "num_key_value_heads"},
                            {c.vocab_size, "vocab_size"}}) {
    RADIX_RETURN_IF_ERROR(RequirePositive(value, key, source));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return InvalidArgument(source +
                           ": num_attention_heads must be a multiple of num_key_value_heads");
  }
  c.head_dim = c.hidden_size / c.num_heads;
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "head_dim", &c.head_dim, source));
  RADIX_RETURN_IF_ERROR(RequirePositive(c.head_dim, "head_dim", source));
  double partial = 1.0;
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "partial_rotary_factor", &partial, source));
  c.rotary_dim = static_cast<int64_t>(std::llround(static_cast<double>(c.head_dim) * partial));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "rotary_dim", &c.rotary_dim, source));
  if (c.rotary_dim <= 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2 != 0) {
    return InvalidArgument(source + ": rotary dimension must be even and at most head_dim");
  }
  RADIX_RETURN_IF_ERROR(ParseMla(cfg, &c, source));
  c.context_length = 2048;
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "max_position_embeddings", &c.context_length, source));
  RADIX_RETURN_IF_ERROR(RequirePositive(c.context_length, "max_position_embeddings", source));
  c.max_position_embeddings = c.context_length;
  if (c.model_type == "roberta" || c.model_type == "xlm-roberta") {
    int64_t pad = 1;
    RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "pad_token_id", &pad, source));
    if (pad < 0 || pad + 1 >= c.max_position_embeddings) {
      return InvalidArgument(source + ": pad_token_id leaves no position embeddings");
    }
    c.position_offset = pad + 1;
    c.context_length = c.max_position_embeddings - c.position_offset;
  }
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "rms_norm_eps", &c.rms_norm_eps, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "layer_norm_eps", &c.layer_norm_eps, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "type_vocab_size", &c.type_vocab_size, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "rope_theta", &c.rope_theta, source));
  if (!cfg.contains("rope_theta") && cfg.contains("rope_parameters") &&
      cfg["rope_parameters"].is_object()) {
    RADIX_RETURN_IF_ERROR(ReadNumber(cfg["rope_parameters"], "rope_theta", &c.rope_theta, source));
  }
  if (!(c.rope_theta > 0)) return InvalidArgument(source + ": rope_theta must be positive");
  RADIX_RETURN_IF_ERROR(ParseRopeScaling(cfg, &c, source));
  c.tie_word_embeddings =
      cfg.value("tie_word_embeddings", config.value("tie_word_embeddings", false));
  c.attention_bias = cfg.value("attention_bias", false);
  if (cfg.contains("hidden_activation") && cfg["hidden_activation"].is_string()) {
    c.hidden_act = cfg["hidden_activation"].get<std::string>();
  } else if (cfg.contains("hidden_act") && cfg["hidden_act"].is_string()) {
    c.hidden_act = cfg["hidden_act"].get<std::string>();
  }
  if (cfg.contains("sliding_window") && cfg["sliding_window"].is_number_integer()) {
    c.sliding_window = cfg["sliding_window"].get<int64_t>();
  }
  int64_t pattern = 0;
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "sliding_window_pattern", &pattern, source));
  // Gemma 2 alternates sliding and global layers (older configs say so nowhere).
  if (pattern == 0 && c.model_type == "gemma2") pattern = 2;
  c.layer_is_sliding.assign(static_cast<size_t>(c.num_layers), false);
  if (cfg.contains("layer_types") && cfg["layer_types"].is_array()) {
    const json& types = cfg["layer_types"];
    if (types.size() != static_cast<size_t>(c.num_layers)) {
      return InvalidArgument(source + ": layer_types must have num_hidden_layers entries");
    }
    for (size_t i = 0; i < types.size(); ++i) {
      c.layer_is_sliding[i] =
          types[i].is_string() && types[i].get<std::string>() == "sliding_attention";
    }
  } else if (pattern > 0 && c.sliding_window > 0) {
    for (int64_t i = 0; i < c.num_layers; ++i)
      c.layer_is_sliding[static_cast<size_t>(i)] = (i + 1) % pattern != 0;
  } else if (c.sliding_window > 0 && cfg.value("use_sliding_window", true)) {
    c.layer_is_sliding.assign(static_cast<size_t>(c.num_layers), true);
  }
  // GGUF LongRoPE (GgufConfigJson's keys; the factors themselves are tensors the model reads).
  if (cfg.contains("rope_factors_attention")) {
    RADIX_RETURN_IF_ERROR(
        ReadNumber(cfg, "rope_factors_attention", &c.rope_factor_attention, source));
    c.rope_original_max_position = c.context_length;
    RADIX_RETURN_IF_ERROR(
        ReadNumber(cfg, "original_max_position_embeddings", &c.rope_original_max_position, source));
  }
  if (cfg.contains("no_rope_layers") && cfg["no_rope_layers"].is_array()) {
    const json& flags = cfg["no_rope_layers"];
    if (static_cast<int64_t>(flags.size()) != c.num_layers) {
      return InvalidArgument(source + ": no_rope_layers must have num_hidden_layers entries");
    }
    for (const json& f : flags) c.layer_uses_rope.push_back(f.is_number() && f != 0);
  } else if (cfg.contains("no_rope_layer_interval")) {
    int64_t interval = 0;
    RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "no_rope_layer_interval", &interval, source));
    if (interval < 1) return InvalidArgument(source + ": no_rope_layer_interval must be >= 1");
    for (int64_t i = 0; i < c.num_layers; ++i) c.layer_uses_rope.push_back((i + 1) % interval);
  }
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "rope_local_base_freq", &c.rope_local_theta, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "query_pre_attn_scalar", &c.query_pre_attn_scalar, source));
  RADIX_RETURN_IF_ERROR(
      ReadNumber(cfg, "final_logit_softcapping", &c.final_logit_softcapping, source));
  RADIX_RETURN_IF_ERROR(
      ReadNumber(cfg, "attn_logit_softcapping", &c.attn_logit_softcapping, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "embedding_multiplier", &c.embedding_multiplier, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "residual_multiplier", &c.residual_multiplier, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "attention_multiplier", &c.attention_multiplier, source));
  RADIX_RETURN_IF_ERROR(ReadNumber(cfg, "logits_scaling", &c.logits_scaling, source));
  if (c.logits_scaling == 0.0) return InvalidArgument(source + ": logits_scaling must not be 0");
  if (cfg.contains("bos_token_id") && cfg["bos_token_id"].is_number_integer()) {
    c.bos_token_id = cfg["bos_token_id"].get<int64_t>();
  }
  if (cfg.contains("eos_token_id")) CollectIds(cfg["eos_token_id"], &c.eos_token_ids);
  c.torch_dtype = cfg.value("torch_dtype", config.value("torch_dtype", std::string()));
  if (generation != nullptr && generation->is_object()) {
    const json& g = *generation;
    if (g.contains("eos_token_id")) CollectIds(g["eos_token_id"], &c.eos_token_ids);
    if (!c.bos_token_id && g.contains("bos_token_id") && g["bos_token_id"].is_number_integer()) {
      c.bos_token_id = g["bos_token_id"].get<int64_t>();
    }
    if (g.contains("temperature") && g["temperature"].is_number())
      c.temperature = g["temperature"].get<double>();
    if (g.contains("top_p") && g["top_p"].is_number()) c.top_p = g["top_p"].get<double>();
    if (g.contains("top_k") && g["top_k"].is_number_integer()) c.top_k = g["top_k"].get<int64_t>();
    if (g.contains("repetition_penalty") && g["repetition_penalty"].is_number()) {
      c.repetition_penalty = g["repetition_penalty"].get<double>();
    }
  }
  return c;
}

Status ApplyJsonOverride(json& config, const std::string& override_json) {
  if (override_json.empty()) return Status::Ok();
  json patch = json::parse(override_json, nullptr, false);
  if (patch.is_discarded() || !patch.is_object()) {
    return InvalidArgument("--json-model-override-args must be a JSON object");
  }
  config.merge_patch(patch);
  return Status::Ok();
}

namespace {

struct GgufArch {
  const char* gguf_name;
  const char* hf_class;
  const char* model_type;
};

constexpr GgufArch kGgufArchs[] = {
    {"llama", "LlamaForCausalLM", "llama"},
    {"qwen2", "Qwen2ForCausalLM", "qwen2"},
    {"qwen3", "Qwen3ForCausalLM", "qwen3"},
    {"gemma3", "Gemma3ForCausalLM", "gemma3_text"},
    {"qwen3moe", "Qwen3MoeForCausalLM", "qwen3_moe"},
    {"qwen2moe", "Qwen2MoeForCausalLM", "qwen2_moe"},
    {"olmoe", "OlmoeForCausalLM", "olmoe"},
    {"olmo2", "Olmo2ForCausalLM", "olmo2"},
    {"granite", "GraniteForCausalLM", "granite"},
    {"smollm3", "SmolLM3ForCausalLM", "smollm3"},
    {"gemma2", "Gemma2ForCausalLM", "gemma2"},
    {"phi3", "Phi3ForCausalLM", "phi3"},
    {"gpt-oss", "GptOssForCausalLM", "gpt_oss"},
    {"deepseek2", "DeepseekV2ForCausalLM", "deepseek_v2"},
};

// llama.cpp's deepseek2 metadata under DeepSeek's HF config keys. Files converted since llama.cpp
// split kv_b (attn_k_b / attn_v_b) give the MLA head sizes as key_length_mla / value_length_mla
// (key_length is then the compressed row); older files only have key_length / value_length.
Status AddDeepseekKeys(const GgufFile& gguf, json& c) {
  const std::string a = "deepseek2.";
  const auto get_int = [&](const std::string& key) { return gguf.GetInt(a + key); };
  RADIX_ASSIGN_OR_RETURN(auto rope, get_int("rope.dimension_count"));
  RADIX_ASSIGN_OR_RETURN(auto k_mla, get_int("attention.key_length_mla"));
  RADIX_ASSIGN_OR_RETURN(auto v_mla, get_int("attention.value_length_mla"));
  RADIX_ASSIGN_OR_RETURN(auto k_len, get_int("attention.key_length"));
  RADIX_ASSIGN_OR_RETURN(auto v_len, get_int("attention.value_length"));
  const std::optional<int64_t> qk = k_mla ? k_mla : k_len, v = v_mla ? v_mla : v_len;
  if (!rope || !qk || !v) {
    return DataLoss(gguf.path() +
                    ": deepseek2 GGUF needs rope.dimension_count and attention key / value "
                    "lengths");
  }
  c["qk_rope_head_dim"] = *rope;
  c["qk_nope_head_dim"] = *qk - *rope;
  c["v_head_dim"] = *v;
  for (auto [key, hf_key] : {std::pair{"attention.q_lora_rank", "q_lora_rank"},
                             {"attention.kv_lora_rank", "kv_lora_rank"},
                             {"leading_dense_block_count", "first_k_dense_replace"},
                             {"expert_shared_count", "n_shared_experts"},
                             {"expert_group_count", "n_group"},
                             {"expert_group_used_count", "topk_group"}}) {
    RADIX_ASSIGN_OR_RETURN(auto value, get_int(key));
    if (value) c[hf_key] = *value;
  }
  RADIX_ASSIGN_OR_RETURN(auto scale, gguf.GetFloat(a + "expert_weights_scale"));
  if (scale) c["routed_scaling_factor"] = *scale;
  const GgufValue* norm = gguf.Find(a + "expert_weights_norm");
  c["norm_topk_prob"] = norm != nullptr && norm->integer != 0;
  // llama_expert_gating_func_type: 0 none (softmax, as llama.cpp assumes for older files),
  // 1 softmax, 2 sigmoid.
  RADIX_ASSIGN_OR_RETURN(auto gating, get_int("expert_gating_func"));
  const int64_t func = gating.value_or(0);
  if (func > 2) {
    return Unsupported(gguf.path() + ": deepseek2 expert_gating_func " + std::to_string(func) +
                       " is not supported (softmax or sigmoid)");
  }
  c["scoring_func"] = func == 2 ? "sigmoid" : "softmax";
  if (func == 2) {
    c["architectures"] = json::array({"DeepseekV3ForCausalLM"});
    c["model_type"] = "deepseek_v3";
  }
  // llama.cpp limits the groups whenever the file has more than one, scoring each by the sum of
  // its two best experts.
  c["topk_method"] = c.value("n_group", int64_t{1}) > 1 ? "noaux_tc" : "greedy";
  // The multi-token-prediction blocks follow the main layers and count in block_count.
  RADIX_ASSIGN_OR_RETURN(auto nextn, get_int("nextn_predict_layers"));
  if (nextn && *nextn > 0) {
    const int64_t blocks = c.value("num_hidden_layers", int64_t{0});
    if (*nextn >= blocks) {
      return DataLoss(gguf.path() + ": deepseek2 nextn_predict_layers " + std::to_string(*nextn) +
                      " leaves no main layers of block_count " + std::to_string(blocks));
    }
    c["num_hidden_layers"] = blocks - *nextn;
    c["num_nextn_predict_layers"] = *nextn;
  }
  return Status::Ok();
}

}  // namespace

Expected<json> GgufConfigJson(const GgufFile& gguf) {
  RADIX_ASSIGN_OR_RETURN(auto arch_or, gguf.GetString("general.architecture"));
  if (!arch_or) return DataLoss(gguf.path() + ": GGUF has no general.architecture");
  const std::string arch = *arch_or;
  const GgufArch* known = nullptr;
  for (const GgufArch& a : kGgufArchs) {
    if (arch == a.gguf_name) known = &a;
  }
  if (known == nullptr) {
    return Unsupported(
        gguf.path() + ": GGUF architecture '" + arch +
        "' is not supported (supported: deepseek2, gemma2, gemma3, gpt-oss, granite, "
        "llama, olmo2, olmoe, phi3, qwen2, qwen2moe, qwen3, qwen3moe, smollm3)");
  }
  json c;
  c["architectures"] = json::array({known->hf_class});
  c["model_type"] = known->model_type;
  // llama.cpp writes Mixtral as a llama file with experts.
  if (arch == "llama" && gguf.Find("llama.expert_count") != nullptr) {
    c["architectures"] = json::array({"MixtralForCausalLM"});
    c["model_type"] = "mixtral";
    c["norm_topk_prob"] = true;
  }
  Status error;
  auto copy_int = [&](const std::string& key, const char* hf_key) {
    auto v = gguf.GetInt(arch + "." + key);
    if (!v.ok()) {
      error = v.status();
    } else if (v.value()) {
      c[hf_key] = *v.value();
    }
  };
  auto copy_float = [&](const std::string& key, const char* hf_key) {
    auto v = gguf.GetFloat(arch + "." + key);
    if (!v.ok()) {
      error = v.status();
    } else if (v.value()) {
      c[hf_key] = *v.value();
    }
  };
  // general.file_type names the storage of the bulk of the weights: 0 all F32, 1 mostly F16,
  // 32 mostly BF16 (llama.cpp's llama_ftype); quantized files leave torch_dtype unset.
  if (auto ftype = gguf.GetInt("general.file_type"); ftype.ok() && ftype.value()) {
    switch (*ftype.value()) {
      case 0:
        c["torch_dtype"] = "float32";
        break;
      case 1:
        c["torch_dtype"] = "float16";
        break;
      case 32:
        c["torch_dtype"] = "bfloat16";
        break;
      default:
        break;
    }
  }
  copy_int("embedding_length", "hidden_size");
  copy_int("feed_forward_length", "intermediate_size");
  copy_int("block_count", "num_hidden_layers");
  copy_int("attention.head_count", "num_attention_heads");
  copy_int("attention.head_count_kv", "num_key_value_heads");
  copy_int("attention.key_length", "head_dim");
  copy_int("rope.dimension_count", "rotary_dim");
  copy_int("context_length", "max_position_embeddings");
  copy_int("vocab_size", "vocab_size");
  copy_int("attention.sliding_window", "sliding_window");
  copy_int("expert_count", "num_experts");
  copy_int("expert_used_count", "num_experts_per_tok");
  copy_int("expert_feed_forward_length", "moe_intermediate_size");
  copy_int("expert_shared_feed_forward_length", "shared_expert_intermediate_size");
  copy_float("attention.layer_norm_rms_epsilon", "rms_norm_eps");
  copy_float("rope.freq_base", "rope_theta");
  copy_float("final_logit_softcapping", "final_logit_softcapping");
  copy_float("attn_logit_softcapping", "attn_logit_softcapping");
  copy_float("embedding_scale", "embedding_multiplier");
  copy_float("residual_scale", "residual_multiplier");
  copy_float("attention.scale", "attention_multiplier");
  copy_float("logit_scale", "logits_scaling");
  // LongRoPE files (phi3): the factor tensors come with these two keys.
  copy_float("rope.scaling.attn_factor", "rope_factors_attention");
  copy_int("rope.scaling.original_context_length", "original_max_position_embeddings");
  if (!error.ok()) return error;
  if (!c.contains("vocab_size")) {
    if (const GgufValue* tokens = gguf.Find("tokenizer.ggml.tokens")) {
      c["vocab_size"] = tokens->array_length;
    } else if (const GgufTensorInfo* embd = gguf.FindTensor("token_embd.weight")) {
      c["vocab_size"] = embd->shape.front();
    }
  }
  RADIX_ASSIGN_OR_RETURN(auto scaling, gguf.GetString(arch + ".rope.scaling.type"));
  if (scaling && *scaling != "none") {
    RADIX_ASSIGN_OR_RETURN(auto factor, gguf.GetFloat(arch + ".rope.scaling.factor"));
    json rs = {{"rope_type", *scaling}, {"factor", factor.value_or(1.0)}};
    // llama.cpp's yarn keys, under their HF names.
    RADIX_ASSIGN_OR_RETURN(auto original,
                           gguf.GetInt(arch + ".rope.scaling.original_context_length"));
    if (original) rs["original_max_position_embeddings"] = *original;
    for (auto [key, hf_key] : {std::pair{"rope.scaling.yarn_beta_fast", "beta_fast"},
                               {"rope.scaling.yarn_beta_slow", "beta_slow"}}) {
      RADIX_ASSIGN_OR_RETURN(auto v, gguf.GetFloat(arch + "." + key));
      if (v) rs[hf_key] = *v;
    }
    // DeepSeek-style files store 0.1 * mscale_all_dim as yarn_log_multiplier.
    RADIX_ASSIGN_OR_RETURN(auto log_mul, gguf.GetFloat(arch + ".rope.scaling.yarn_log_multiplier"));
    if (log_mul && *log_mul > 0) {
      rs["mscale_all_dim"] = *log_mul / 0.1;
      rs["mscale"] = *log_mul / 0.1;
    }
    c["rope_scaling"] = rs;
  }
  c["tie_word_embeddings"] = gguf.FindTensor("output.weight") == nullptr;
  if (arch == "qwen2" || arch == "qwen2moe") c["attention_bias"] = true;
  // llama.cpp's qwen3moe graph always renormalizes the chosen experts' weights.
  if (arch == "qwen3moe") c["norm_topk_prob"] = true;
  // llama.cpp's smollm3 graph skips RoPE in every 4th layer (no metadata key says so).
  if (arch == "smollm3") c["no_rope_layer_interval"] = 4;
  if (arch == "gemma2") {
    c["hidden_activation"] = "gelu_pytorch_tanh";
    if (!c.contains("sliding_window")) c["sliding_window"] = 4096;  // llama.cpp's default
    if (!c.contains("rope_theta")) c["rope_theta"] = 10000.0;
    // llama.cpp scales by 1/sqrt(hidden / heads) for the 46-layer (27B) model, else by
    // 1/sqrt(head_dim), as gemma_pytorch's config does.
    const int64_t layers = c.value("num_hidden_layers", int64_t{0});
    if (layers == 46 && c.contains("hidden_size") && c.contains("num_attention_heads")) {
      c["query_pre_attn_scalar"] =
          c["hidden_size"].get<int64_t>() / c["num_attention_heads"].get<int64_t>();
    } else if (c.contains("head_dim")) {
      c["query_pre_attn_scalar"] = c["head_dim"];
    }
  }
  if (arch == "deepseek2") RADIX_RETURN_IF_ERROR(AddDeepseekKeys(gguf, c));
  if (arch == "gpt-oss") {
    // llama.cpp's gpt-oss graph: every other layer (the even ones) slides, Q/K/V carry biases;
    // the SwiGLU clamp is ParseMoe's gpt-oss default (7, fixed in llama.cpp too).
    c["sliding_window_pattern"] = 2;
    c["attention_bias"] = true;
  }
  if (arch == "gemma3") {
    c["hidden_activation"] = "gelu_pytorch_tanh";
    c["sliding_window_pattern"] = 6;
    c["rope_local_base_freq"] = 10000.0;
    if (c.contains("head_dim")) c["query_pre_attn_scalar"] = c["head_dim"];
    if (!c.contains("rope_theta")) c["rope_theta"] = 1000000.0;
  }
  for (auto [key, hf_key] : {std::pair{"tokenizer.ggml.bos_token_id", "bos_token_id"},
                             {"tokenizer.ggml.eos_token_id", "eos_token_id"}}) {
    RADIX_ASSIGN_OR_RETURN(auto v, gguf.GetInt(key));
    if (v) c[hf_key] = *v;
  }
  return c;
}

}  // namespace radixserve::model

// ModelConfig: the shape and hyper-parameters of a decoder-only model, in Hugging Face terms.
//
// Both checkpoint kinds go through one parser: an HF folder's config.json as is, and a GGUF
// file's metadata first rewritten into the same HF-style JSON (GgufConfigJson). That way
// --json-model-override-args (a JSON object merged over the config before parsing) behaves the
// same for both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "kernels/rope.h"
#include "model/expert_placement.h"
#include "model/tensor_shard.h"

namespace radixserve::model {

class GgufFile;

struct ModelConfig {
  std::string architecture;  // HF class name, e.g. "LlamaForCausalLM"
  std::string model_type;    // e.g. "llama", "qwen2", "qwen3", "gemma3_text"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;  // head_dim unless the config asks for partial rotary
  int64_t vocab_size = 0;
  int64_t context_length = 0;  // max_position_embeddings (or --context-length)
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  kernels::RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  std::string hidden_act = "silu";
  // Encoders (BERT): LayerNorm epsilon and the number of token-type (segment) embeddings.
  double layer_norm_eps = 1e-12;
  int64_t type_vocab_size = 0;
  // max_position_embeddings as the config says it (context_length may be overridden; an
  // encoder's absolute position table has this many rows).
  int64_t max_position_embeddings = 0;
  // The position-table row of a sequence's first token: RoBERTa and XLM-RoBERTa number positions
  // from pad_token_id + 1 (their context is that much shorter than the table); 0 elsewhere.
  int64_t position_offset = 0;
  // The model serves hidden states only (an embedder or a classifier: --is-embedding, a
  // *ForSequenceClassification or a headless *Model checkpoint): the LM head is not loaded and
  // Forward (logits) is refused; ForwardHidden works. Set by the loader, not read from a file.
  bool hidden_states_only = false;
  // Tensor parallelism (tensor_shard.h): set by the loader from LoadOptions. Once a sharded model
  // is built, its config() gives the shard's num_heads, num_kv_heads and intermediate_size.
  TensorShard tensor_shard;
  // Pipeline parallelism (tensor_shard.h): set by the loader from LoadOptions. A stage's config()
  // gives its own layer count (num_layers); its layers start at pipeline_first_layer.
  PipelineStage pipeline_stage;
  int64_t pipeline_first_layer = 0;
  // Expert placement over the expert-parallel blocks (expert_placement.h): set by the loader from
  // LoadOptions; MoE models only.
  ExpertPlacementOptions expert_placement;

  // Gemma 3: sliding-window layers use rope_local_theta; every sliding_window_pattern-th layer
  // is global. query_pre_attn_scalar sets the attention scale (1/sqrt of it).
  int64_t sliding_window = 0;          // 0: no sliding window
  std::vector<bool> layer_is_sliding;  // size num_layers
  double rope_local_theta = 10000.0;
  double query_pre_attn_scalar = 0.0;  // 0: head_dim
  double final_logit_softcapping = 0.0;
  double attn_logit_softcapping = 0.0;

  // LongRoPE (Phi-3.5, Phi-4-mini; HF rope_scaling type longrope / su, GGUF rope_factors_long /
  // rope_factors_short tensors): per-dimension divisors of the rotary frequencies (rotary_dim / 2
  // each). The long set applies when the model's context (max_position_embeddings) exceeds
  // rope_original_max_position, as llama.cpp decides at its default context; cos and sin are
  // multiplied by rope_factor_attention.
  std::vector<float> rope_long_factor, rope_short_factor;
  int64_t rope_original_max_position = 0;
  double rope_factor_attention = 1.0;

  // SmolLM3's NoPE layers: false for a layer whose attention applies no rotary embedding (HF
  // no_rope_layers, or every no_rope_layer_interval-th layer); empty: every layer rotates.
  std::vector<bool> layer_uses_rope;

  // Granite's scalings: embeddings times embedding_multiplier, each attention / MLP output times
  // residual_multiplier before its residual add, attention scores times attention_multiplier
  // (0: 1/sqrt(head_dim)), logits divided by logits_scaling.
  double embedding_multiplier = 1.0;
  double residual_multiplier = 1.0;
  double attention_multiplier = 0.0;
  double logits_scaling = 1.0;

  // Mixture-of-experts FFN (Qwen3-MoE): every layer routes each token to num_experts_per_tok of
  // num_experts SiLU-gated experts of width moe_intermediate_size. 0 experts: a dense model.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;  // renormalize the chosen experts' softmax weights to sum 1
  // A shared expert every token runs, 0: none; Qwen2-MoE scales it by sigmoid(shared gate . h)
  // (shared_expert_gated), DeepSeek adds it as is (n_shared_experts x moe_intermediate_size).
  int64_t shared_expert_intermediate_size = 0;
  bool shared_expert_gated = true;
  // How the router turns logits into expert weights: kSoftmax, softmax over all experts then the
  // top k (renormalized per norm_topk_prob); kTopKSoftmax (gpt-oss), the top k logits then a
  // softmax over those k only; kSigmoid (DeepSeek-V3), an independent sigmoid per expert, the
  // top k chosen by sigmoid + the router's correction bias, weighted by the unbiased sigmoid.
  enum class MoeGating { kSoftmax, kTopKSoftmax, kSigmoid };
  MoeGating moe_gating = MoeGating::kSoftmax;
  // DeepSeek: the chosen experts' weights times routed_scaling_factor; the first
  // first_dense_layers layers run a dense MLP of intermediate_size (first_k_dense_replace).
  double routed_scaling_factor = 1.0;
  int64_t first_dense_layers = 0;
  // DeepSeek-V3's multi-token-prediction (NextN) blocks after the main layers
  // (num_nextn_predict_layers; GGUF nextn_predict_layers, counted in its block_count). load_mtp:
  // the model loads the first one (CausalLM::ForwardMtp); set by the loader, not read from a file.
  int64_t nextn_layers = 0;
  bool load_mtp = false;
  // DeepSeek's group-limited routing: the experts form expert_groups equal groups; a token
  // picks its top_k experts among the expert_groups_used groups of highest score, a group's
  // score being its highest expert score (kMax, V2's group_limited_greedy) or the sum of its two
  // highest (kTopTwoSum, V3's noaux_tc and llama.cpp). 1 group: no limit.
  enum class MoeGroupScore { kMax, kTopTwoSum };
  int64_t expert_groups = 1;
  int64_t expert_groups_used = 1;
  MoeGroupScore group_score = MoeGroupScore::kTopTwoSum;
  // Multi-head latent attention (DeepSeek-V2/V3; kv_lora_rank > 0). Keys and values of a token are
  // one compressed row: the normed latent c (kv_lora_rank) and the rotary key k_pe
  // (qk_rope_head_dim, shared by the heads), so the model's KV geometry is num_kv_heads 1 and
  // head_dim kv_lora_rank + qk_rope_head_dim, with the values a prefix of the keys
  // (kv_values_in_keys); rotary_dim is qk_rope_head_dim. Each query head has qk_nope_head_dim +
  // qk_rope_head_dim dimensions and each value head v_head_dim. q_lora_rank 0: a plain Q projection
  // (V2-Lite).
  struct Mla {
    int64_t q_lora_rank = 0;
    int64_t kv_lora_rank = 0;
    int64_t qk_nope_head_dim = 0;
    int64_t qk_rope_head_dim = 0;
    int64_t v_head_dim = 0;
    // q_pe / k_pe rotate adjacent pairs (DeepSeek's layout, llama.cpp's NORM rope); HF
    // DeepSeek-V3 configs may say rope_interleave false (rotate-half).
    bool rope_interleave = true;
    bool enabled() const { return kv_lora_rank > 0; }
  } mla;
  // The KV cache's V rows are a prefix of its K rows (MLA): a pool keeps one buffer per layer.
  bool kv_values_in_keys() const { return mla.enabled(); }
  // gpt-oss's clamped SwiGLU ("swiglu_oai") in the experts: gate clamped to at most swiglu_limit,
  // up to [-swiglu_limit, swiglu_limit], out = gate * sigmoid(swiglu_alpha * gate) * (up + 1).
  // 0: plain SiLU gating.
  double swiglu_limit = 0.0;
  double swiglu_alpha = 1.702;

  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // config.json and generation_config.json, merged
  std::string torch_dtype;             // as written in config.json ("" for GGUF)

  // Sampling defaults from generation_config.json (absent: not given).
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> repetition_penalty;

  // Total parameters implied by the shapes above (for the load log line).
  int64_t ParameterCount() const;
};

// Parses an HF-style config (after any overrides were merged). generation may be null.
// `source` names the file in error messages.
Expected<ModelConfig> ParseModelConfig(const nlohmann::json& config,
                                       const nlohmann::json* generation, const std::string& source);

// HF-style config JSON from GGUF metadata (architectures llama (Mixtral when it has experts),
// deepseek2, granite, olmo2, olmoe, phi3, qwen2, qwen2moe, qwen3, qwen3moe, smollm3, gemma2,
// gemma3, gpt-oss).
Expected<nlohmann::json> GgufConfigJson(const GgufFile& gguf);

// Merges `override_json` (a JSON object as text; empty means none) into config, key by key,
// recursing into nested objects like HF's update().
Status ApplyJsonOverride(nlohmann::json& config, const std::string& override_json);

}  // namespace radixserve::model

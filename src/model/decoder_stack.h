// DecoderStack: the pre-norm transformer decoder every architecture here is a variant of, from
// token embedding to logits. Per layer: [RMSNorm ->] fused Q/K/V projection (+ bias) -> per-head
// Q/K RMSNorm -> RoPE -> paged attention -> output projection [-> RMSNorm] -> residual ->
// [RMSNorm ->] fused gate/up projection -> SiLU or tanh-GELU gating -> down projection (or a
// mixture of experts, moe_ffn.h) [-> RMSNorm] -> residual; then the final RMSNorm and the LM
// head. Architectures (one file each) only fill a DecoderSpec and check their own config.
//
// Load fuses Q/K/V into one weight matrix and gate/up into another when their storage formats
// match (FusedWeights), so a decode step runs one MatMul where it would run three (or two).
//
// LoRA: a sequence of the batch may name an adapter (SequenceExtend::lora). The base projections
// run once for the whole batch; then, per adapter, the rows of its sequences go through the
// low-rank update (shrink by A, expand by B) and are added to the projection's output.
//
// Tensor parallelism (tensor_shard.h): with a sharded config, Load keeps this rank's heads and MLP
// rows, and Forward all-reduces the output and down projections' partial sums; `logits` null
// (ranks other than 0, which hold no LM head) stops after the final norm. Pipeline parallelism
// (same header): a stage's Load keeps its layers only, and Forward passes micro-batches between
// the stages; `logits` null on every rank but stage 0's tensor-parallel rank 0.
//
// Forward: see CausalLM::Forward. Reentrant: all per-step buffers are the calling thread's
// ForwardScratch, so engine replicas may run steps on one shared stack from their own threads
// (each with its own pool and KV view). Allocates nothing once the largest batch was seen
// (apart from what the kernels and PagedAttention allocate).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/quant_matmul.h"
#include "kernels/rope.h"
#include "model/forward_batch.h"
#include "model/fused_weights.h"
#include "model/kv_cache_view.h"
#include "model/lora_adapter.h"
#include "model/mla_attention.h"
#include "model/model_config.h"
#include "model/moe_ffn.h"
#include "model/weight_store.h"

namespace radixserve::model {

enum class GatedActivation { kSilu, kGeluTanh };

struct DecoderSpec {
  float norm_offset = 0.0f;      // every RMSNorm multiplies by (norm_offset + w)
  float embed_scale = 1.0f;      // multiplies the token embeddings (Gemma: sqrt(hidden))
  bool qkv_bias = false;         // Qwen2
  bool output_bias = false;      // a bias on the attention's output projection (gpt-oss)
  bool attention_sinks = false;  // one learned sink logit per head, blk.N.attn_sinks (gpt-oss)
  bool qk_norm = false;          // RMSNorm on each Q and K head before RoPE (Qwen3, Gemma 3)
  // With qk_norm: one RMSNorm over a token's whole Q (and whole K) projection instead, weights of
  // q_dim (kv_dim) entries (OLMoE).
  bool qk_norm_full = false;
  bool sandwich_norms = false;  // RMSNorm after attention and after the MLP too (Gemma 3)
  // RMSNorm on the attention's and the MLP's inputs; false: they read the residual stream as is
  // and only their outputs are normed (OLMo 2: sandwich_norms without the pre-norms).
  bool pre_norms = true;
  // The MLP's input norm (with pre_norms): "ffn_norm", or gpt-oss's "post_attention_norm".
  std::string ffn_norm_tensor = "ffn_norm";
  // The checkpoint stores the MLP's gate and up projections stacked in ffn_up ([gate; up], 2 x
  // intermediate rows: Phi-3's gate_up_proj). Stacked Q/K/V (attn_qkv) are read when present.
  bool gate_up_in_up = false;
  // Use token_embd as LM head when the checkpoint has no output.weight.
  bool tie_word_embeddings = false;
  GatedActivation activation = GatedActivation::kSilu;
  kernels::RopeLayout rope_layout = kernels::RopeLayout::kRotateHalf;
  std::vector<float> inv_freq;         // RoPE frequencies (global layers)
  float rope_attention_factor = 1.0f;  // multiplies cos/sin of global layers (yarn)
  // Layers marked in ModelConfig::layer_is_sliding attend within sliding_window and use
  // inv_freq_local (Gemma 3; empty: the global frequencies and attention factor, gpt-oss);
  // otherwise every layer is global.
  bool sliding_window_layers = false;
  std::vector<float> inv_freq_local;
  kernels::AttentionShape attention;
  float final_logit_softcap = 0.0f;  // > 0: logits = cap * tanh(logits / cap)
  float logit_scale = 1.0f;          // logits divided by it (Granite's logits_scaling)
  float residual_scale = 1.0f;       // attention / MLP outputs times it before the residual add
  // Every layer's MLP is a mixture of experts (MoeFfn, shaped by the config's num_experts...),
  // but the config's first_dense_layers.
  bool moe = false;
  // Multi-head latent attention (MlaAttention, the config's mla) instead of Q/K/V projections;
  // `attention` is then the attention over the compressed cache rows.
  bool mla = false;
};

struct BatchLayout;

class DecoderStack {
 public:
  // Reads every layer's tensors (GGUF names) that `spec` asks for, with shapes from `config`.
  Status Load(const ModelConfig& config, DecoderSpec spec, WeightStore& weights);

  // `hidden` (non-null when batch.hidden_indices is not empty): see CausalLM::ForwardWithHidden.
  Status Forward(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool, float* logits,
                 float* hidden = nullptr) const;
  // See CausalLM::ForwardMtp (config().load_mtp).
  Status ForwardMtp(const ForwardBatch& batch, const float* h_in, const KvCacheView& kv,
                    ThreadPool* pool, float* logits, float* h_out) const;
  // See CausalLM::ForwardHidden.
  Status ForwardHidden(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool,
                       float* hidden) const;

  // A LoRA adapter for this stack (its rotary row order and MoE switch filled in).
  Expected<std::shared_ptr<const LoraAdapter>> LoadLora(const std::string& path,
                                                        LoraLoadOptions options) const {
    if (config_.tensor_shard.sharded() || config_.pipeline_stage.split()) {
      return InvalidArgument("LoRA adapters run with --tp-size 1 and --pp-size 1 only ('" + path +
                             "')");
    }
    options.base_rope_layout = spec_.rope_layout;
    options.moe = spec_.moe;
    return LoraAdapter::Load(path, config_, options);
  }

  // The config the stack runs: the checkpoint's, or this rank's shard of it (num_heads,
  // num_kv_heads and intermediate_size divided by the tensor-parallel size; num_layers the
  // pipeline stage's).
  const ModelConfig& config() const { return config_; }

  // Layers whose Q/K/V (gate/up) projections run as one stacked matrix.
  int fused_qkv_layers() const;
  int fused_gate_up_layers() const;

 private:
  struct Layer {
    int64_t index = 0;
    std::vector<float> attn_norm, ffn_norm, post_attn_norm, post_ffn_norm, q_norm, k_norm;
    std::vector<float> qkv_bias;  // [q | k | v] when spec.qkv_bias
    std::vector<float> o_bias;    // [hidden] when spec.output_bias
    std::vector<float> sinks;     // [num_heads] when spec.attention_sinks
    bool qkv_fused = false;       // then q holds the stacked [q; k; v] rows
    // Packed for the active kernels at load (see kernels::Pack) when the model runs llama.cpp's
    // quantized numerics; otherwise they only wrap the matrices.
    kernels::PackedWeight q, k, v, o;
    bool gate_up_fused = false;  // then gate holds the stacked [gate; up] rows
    kernels::PackedWeight gate, up, down;
    std::optional<MoeFfn> moe;        // replaces gate/up/down in spec.moe's sparse layers
    std::optional<MlaAttention> mla;  // replaces q/k/v/o when spec.mla
    bool sliding = false;             // local RoPE frequencies
    bool rope = true;                 // false: a NoPE layer (SmolLM3)
    int64_t sliding_window = 0;       // 0: unlimited
  };
  // DeepSeek-V3's multi-token-prediction block (ForwardMtp).
  struct Mtp {
    Layer layer;
    std::vector<float> enorm, hnorm, head_norm;
    kernels::PackedWeight eh_proj;    // [hidden, 2 x hidden]
    kernels::WeightMatrix embedding;  // its own (nextn.embed_tokens) or the model's
    kernels::PackedWeight head;       // its own LM head when own_head, else the model's
    bool own_head = false;
  };
  struct Step;
  // One layer's K or V cache as KvCacheView holds it (passed through to PagedAttention).
  using LayerCache = decltype(KvCacheView::k)::value_type;

  // InvalidArgument for a token id outside the vocabulary; `kv` must hold `layers` layers of the
  // model's K/V geometry (a caller bug otherwise).
  Status CheckInputs(const ForwardBatch& batch, const KvCacheView& kv, int64_t layers) const;
  // Embeds, runs every layer and applies the final RMSNorm to the rows of logit_indices, then of
  // hidden_indices: the returned [both sizes, hidden] rows live in the calling thread's
  // ForwardScratch. Under pipeline parallelism only stage 0's tensor-parallel rank 0 gets them
  // (the rows of other ranks are not written).
  Expected<const float*> RunToFinalRows(const ForwardBatch& batch, const KvCacheView& kv,
                                        ThreadPool* pool) const;
  // RunToFinalRows over the pipeline's stages (tensor_shard.h), one micro-batch at a time.
  const float* RunPipelined(const ForwardBatch& batch, const KvCacheView& kv,
                            ThreadPool* pool) const;
  // The token embeddings of `batch` into x [T, hidden].
  void Embed(const ForwardBatch& batch, float* x) const;
  // Every layer of this stack over the residual stream x [T, hidden] (the scratch's x).
  void RunLayers(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool) const;
  // What every layer of one step shares: the adapters' row groups and the rotary tables (in the
  // calling thread's ForwardScratch).
  Step PrepareStep(const ForwardBatch& batch, const BatchLayout& layout, ThreadPool* pool) const;
  // InvalidArgument naming --pp-size when the layers cannot be split over the stages.
  static Status CheckStageable(const ModelConfig& c);
  // InvalidArgument naming --tp-size when the config cannot be split over its shard's size.
  static Status CheckShardable(const ModelConfig& c, const DecoderSpec& spec);
  // Columns [first, first + n) of `m` (FusedWeights owns the copy), InvalidArgument naming the
  // tensor when they do not hold whole blocks.
  Expected<kernels::WeightMatrix> ShardColumns(const kernels::WeightMatrix& m, int64_t first,
                                               int64_t n, const std::string& name);
  void RunLayer(const Step& step, const Layer& layer, LayerCache k_cache, LayerCache v_cache) const;
  // h[T, hidden] = the attention block's output for its normed input h, in place (before the
  // residual add; all-reduced under tensor parallelism).
  void Attention(const Step& step, const Layer& layer, LayerCache k_cache, LayerCache v_cache,
                 float* h) const;
  // Adds the step's routing in `layer` (MoeFfn's choices in the scratch) to the batch's
  // expert_choices.
  void RecordChoices(const Step& step, const Layer& layer) const;
  // h[T, hidden] = down(act(gate h) * up h), in place.
  void DenseMlp(const Step& step, const Layer& layer, float* h) const;
  // Adds each adapted row's scale * B (A x_t) for every target in `outs` (projections of the same
  // input x [T, in]) to its output. Rows of sequences without an adapter are not touched.
  void ApplyLora(const Step& step, const Layer& layer, const float* x,
                 std::initializer_list<LoraOut> outs) const;

  ModelConfig config_;
  DecoderSpec spec_;
  kernels::ActivationMode activation_mode_ = kernels::ActivationMode::kExact;
  kernels::WeightMatrix embedding_;
  kernels::PackedWeight lm_head_;
  std::vector<float> output_norm_;
  std::vector<Layer> layers_;
  std::optional<Mtp> mtp_;
  FusedWeights fused_;
};

}  // namespace radixserve::model

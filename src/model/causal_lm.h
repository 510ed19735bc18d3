// CausalLM: the one interface every architecture implements (one class per file).
//
// Forward is called by the engine thread only; it uses the thread pool for the heavy loops and
// is not reentrant. Weights are read-only after construction, so several engine replicas may
// share one model only if each calls Forward from its own thread with its own KV view and the
// implementation keeps no per-call state in members (ours keep none).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "model/forward_batch.h"
#include "model/kv_cache_view.h"
#include "model/lora_adapter.h"
#include "model/model_config.h"

namespace radixserve::model {

class CausalLM {
 public:
  virtual ~CausalLM() = default;

  virtual const ModelConfig& config() const = 0;
  // Bytes of weights the model uses (as stored: quantized tensors count their packed size).
  virtual int64_t weight_bytes() const = 0;

  // Runs one step. Writes K/V of the new tokens into the KV view and logits
  // [batch.logit_indices.size(), vocab_size] (row-major, float32) to `logits`.
  // Token ids out of [0, vocab) give InvalidArgument; a batch whose lengths or slots are
  // inconsistent is a caller bug (RADIX_CHECK).
  virtual Status Forward(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool,
                         float* logits) const = 0;

  // Forward, and also the final hidden states (after the last norm) of the rows
  // batch.hidden_indices names, [batch.hidden_indices.size(), hidden_size] to `hidden`.
  // Architectures without it give Unsupported.
  virtual Status ForwardWithHidden(const ForwardBatch& batch, const KvCacheView& kv,
                                   ThreadPool* pool, float* logits, float* hidden) const {
    (void)batch, (void)kv, (void)pool, (void)logits, (void)hidden;
    return Unsupported("hidden-state outputs are not supported for " + config().architecture);
  }

  // DeepSeek-V3's multi-token-prediction block (loaded with ModelConfig::load_mtp), the NEXTN
  // draft. Each token of `batch` enters with h_in's row [T, hidden]: the target's final hidden
  // state (after the last norm) of the position before it, zeros at position 0 (llama.cpp's
  // pairing). Embedding and h_in go through their RMSNorms (enorm, hnorm), concatenated through
  // eh_proj, then one more decoder layer whose K/V lives in `kv` (one layer, the target's
  // geometry), the block's own norm and the LM head: logits [batch.logit_indices.size(), vocab]
  // and, when h_out is not null, those rows' normed states (the next draft step's h_in).
  virtual Status ForwardMtp(const ForwardBatch& batch, const float* h_in, const KvCacheView& kv,
                            ThreadPool* pool, float* logits, float* h_out) const {
    (void)batch, (void)h_in, (void)kv, (void)pool, (void)logits, (void)h_out;
    return Unsupported("multi-token prediction is not supported for " + config().architecture);
  }

  // Runs one step as Forward does, but writes the final hidden states (after the last norm)
  // [batch.logit_indices.size(), hidden_size] to `hidden` instead of logits: what embedders and
  // classification heads pool. Architectures without it give Unsupported.
  virtual Status ForwardHidden(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool,
                               float* hidden) const {
    (void)batch, (void)kv, (void)pool, (void)hidden;
    return Unsupported("hidden-state outputs are not supported for " + config().architecture);
  }

  // SGLang's get_weights_by_name: the first `max_rows` rows of the checkpoint tensor `hf_name`
  // names as HF does (e.g. "model.layers.0.self_attn.q_proj.weight"; "lm_head.weight" is the
  // embedding when tied), as float32 in HF's layout (GGUF's interleaved Q/K rows put back in
  // rotate-half order), the values as the checkpoint stores them. A 1-D tensor is one row.
  // NotFound for a name the checkpoint does not hold; Unsupported where not implemented.
  struct WeightRows {
    std::vector<std::vector<float>> rows;
    bool one_dim = false;
  };
  virtual Expected<WeightRows> ReadWeight(const std::string& hf_name, int64_t max_rows) const {
    (void)max_rows;
    return Unsupported("reading weights by name is not supported for " + config().architecture +
                       " ('" + hf_name + "')");
  }

  // Reads a LoRA adapter for this model (lora_adapter.h); sequences then name it in
  // SequenceExtend::lora. The model fills the options' rotary layout and MoE switch.
  // Architectures without LoRA support give Unsupported.
  virtual Expected<std::shared_ptr<const LoraAdapter>> LoadLora(const std::string& path,
                                                                LoraLoadOptions options) const {
    (void)options;
    return Unsupported("LoRA adapters are not supported for " + config().architecture + " ('" +
                       path + "')");
  }
};

}  // namespace radixserve::model

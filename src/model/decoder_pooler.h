// DecoderPooler: a causal decoder served the way an encoder is (EncoderModel), for
//   - embedders: --is-embedding on a *ForCausalLM, or a headless checkpoint (Qwen3Model,
//     LlamaModel: Qwen3-Embedding-style sentence-transformers folders), pooled as the folder's
//     sentence-transformers files say, or by the last token and L2-normalized when the folder has
//     none (SGLang's pooler for --is-embedding decoders);
//   - sequence classifiers and reward models (*ForSequenceClassification): the last token's final
//     hidden state through the score head, giving num_labels logits (not normalized).
//
// Every sequence of a batch runs through the decoder with causal attention, its K/V written to a
// scratch buffer the pooler keeps (guarded by a mutex, so Embed may be called from any thread),
// and nothing outlives the call. The batch runs in groups of whole sequences of at most
// kScratchTokens tokens (a longer sequence alone), so the scratch holds max(kScratchTokens,
// longest sequence) positions whatever the batch size.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "model/encoder_model.h"
#include "model/kv_cache_view.h"

namespace radixserve::model {

// A *ForSequenceClassification score head: logits = weight h (+ bias).
struct ClassifierHead {
  std::vector<float> weight;  // [info.labels.size(), hidden] row-major
  std::vector<float> bias;    // empty or [info.labels.size()]
  ClassifierInfo info;
};

class DecoderPooler final : public EncoderModel {
 public:
  static constexpr int64_t kScratchTokens = 4096;

  // `decoder` must have been loaded with hidden_states_only. `head` null: an embedder pooled by
  // `pooling`; else a classifier (pooling is then the last token, not normalized).
  DecoderPooler(std::unique_ptr<CausalLM> decoder, PoolingConfig pooling,
                std::unique_ptr<ClassifierHead> head);

  const ModelConfig& config() const override { return decoder_->config(); }
  const PoolingConfig& pooling() const override { return pooling_; }
  int64_t weight_bytes() const override;
  int64_t embedding_dim() const override;
  const ClassifierInfo& classifier() const override {
    return head_ ? head_->info : EncoderModel::classifier();
  }
  Status Embed(const ForwardBatch& batch, ThreadPool* pool, float* out) const override;

 private:
  std::unique_ptr<CausalLM> decoder_;
  PoolingConfig pooling_;
  std::unique_ptr<ClassifierHead> head_;
  mutable std::mutex mu_;                       // guards kv_
  mutable std::unique_ptr<KvCacheBuffers> kv_;  // scratch K/V, num_slots >= the largest batch
};

}  // namespace radixserve::model

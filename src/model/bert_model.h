// BertModel: the BERT encoder (HF `BertModel`, e.g. all-MiniLM-L6-v2) followed by the pooling its
// folder declares, or (BertForSequenceClassification, a cross-encoder) by BERT's pooler (dense +
// tanh on the [CLS] state) and the classifier, one logit per label. Embeddings are word +
// absolute position + token type (ForwardBatch::token_type_ids, 0 when empty), then LayerNorm; each
// layer is post-norm: bidirectional multi-head attention (biased Q/K/V/O projections) + residual
// + LayerNorm, then dense + exact erf GELU + dense + residual + LayerNorm.
//
// RoBERTa and XLM-RoBERTa (RobertaModel, XLMRobertaModel and their sequence classifiers) are the
// same network: positions start at ModelConfig::position_offset, one token type, and the
// classifier head's dense / out_proj load as the pooler and the classifier.
//
// All activations are float32; weight matrices stay in their stored float format (or --dtype's).
// Weights use the HF names (WeightStore keeps them for model_type "bert", "roberta" and
// "xlm-roberta").
#pragma once

#include <memory>

#include "common/status.h"
#include "kernels/matmul.h"
#include "kernels/quant_matmul.h"
#include "model/encoder_model.h"
#include "model/weight_store.h"

namespace radixserve::model {

class BertModel final : public EncoderModel {
 public:
  // `classifier` with labels: a BertForSequenceClassification (pooler.dense, classifier weights).
  static Expected<std::unique_ptr<EncoderModel>> Create(ModelConfig config, PoolingConfig pooling,
                                                        std::unique_ptr<WeightStore> weights,
                                                        ClassifierInfo classifier = {});

  const ModelConfig& config() const override { return config_; }
  const PoolingConfig& pooling() const override { return pooling_; }
  int64_t weight_bytes() const override { return weights_->used_bytes(); }
  int64_t embedding_dim() const override {
    return classifier_.labels.empty() ? config_.hidden_size
                                      : static_cast<int64_t>(classifier_.labels.size());
  }
  const ClassifierInfo& classifier() const override { return classifier_; }
  Status Embed(const ForwardBatch& batch, ThreadPool* pool, float* out) const override;

  // The last layer's hidden states [batch.num_tokens(), hidden_size] before pooling.
  Status Encode(const ForwardBatch& batch, ThreadPool* pool, float* hidden) const;

 private:
  struct Linear {
    kernels::PackedWeight w;  // F32: panels (kernels/float_matmul.h); else the stored matrix
    std::vector<float> bias;
  };
  struct Norm {
    std::vector<float> weight, bias;
  };
  struct Layer {
    Linear q, k, v, o, up, down;
    Norm attn_norm, ffn_norm;
  };

  BertModel(ModelConfig config, PoolingConfig pooling, std::unique_ptr<WeightStore> weights,
            ClassifierInfo classifier)
      : config_(std::move(config)),
        pooling_(pooling),
        weights_(std::move(weights)),
        classifier_(std::move(classifier)) {}
  Status Load();
  Expected<Linear> LoadLinear(const std::string& prefix, int64_t rows, int64_t cols);
  Expected<Norm> LoadNorm(const std::string& prefix);
  void ApplyLinear(ThreadPool* pool, const Linear& l, const float* x, int64_t n, float* y) const;
  void ApplyLayerNorm(ThreadPool* pool, const Norm& norm, float* x, int64_t n) const;
  void Attention(ThreadPool* pool, const ForwardBatch& batch, const float* q, const float* k,
                 const float* v, float* out) const;

  ModelConfig config_;
  PoolingConfig pooling_;
  std::unique_ptr<WeightStore> weights_;
  kernels::WeightMatrix word_, position_, token_type_;
  Norm embed_norm_;
  std::vector<Layer> layers_;
  ClassifierInfo classifier_;
  Linear pooler_, classifier_head_;  // loaded when classifier_ has labels
};

}  // namespace radixserve::model

// EncoderModel: the interface of a bidirectional encoder that turns each sequence of a batch into
// one pooled embedding (BERT-style sentence embedders; one class per architecture).
//
// Encoders keep no KV: every sequence of the batch is complete (prefix_len 0, its whole input
// in extend_len) and attends to all of its own tokens, never to another sequence's. Embed is
// called by the engine thread only (or a tool's main thread); weights are read-only after
// construction and no per-call state lives in members.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "model/forward_batch.h"
#include "model/model_config.h"
#include "model/pooling.h"

namespace radixserve::model {

// How a cross-encoder's relevance score is read from its first logit: config.json's
// sbert_ce_default_activation_function, as SGLang reads it (absent: identity).
enum class ScoreActivation { kIdentity, kSigmoid };

// A sequence classifier (*ForSequenceClassification): Embed writes one logit per label,
// unnormalized, and the pooling config does not apply.
struct ClassifierInfo {
  std::vector<std::string> labels;  // config.json id2label, by id; empty: not a classifier
  ScoreActivation activation = ScoreActivation::kIdentity;
};

class EncoderModel {
 public:
  virtual ~EncoderModel() = default;

  virtual const ModelConfig& config() const = 0;
  virtual const PoolingConfig& pooling() const = 0;
  virtual int64_t weight_bytes() const = 0;
  // Width of one embedding (the hidden size for BERT; the number of labels for a classifier).
  virtual int64_t embedding_dim() const = 0;
  // What a classifier's Embed output means (its labels empty for an embedder).
  virtual const ClassifierInfo& classifier() const {
    static const ClassifierInfo kNone;
    return kNone;
  }

  // Writes embeddings [batch.sequences.size(), embedding_dim()] (row-major float32) to `out`,
  // pooled and (if the pooling config says so) L2-normalized. batch.positions are the absolute
  // positions (normally 0 .. len-1 per sequence); kv_slots and logit_indices are not used.
  // Token ids out of [0, vocab) and positions out of [0, context_length) give InvalidArgument;
  // a sequence with prefix_len != 0 or inconsistent lengths is a caller bug (RADIX_CHECK).
  virtual Status Embed(const ForwardBatch& batch, ThreadPool* pool, float* out) const = 0;
};

}  // namespace radixserve::model

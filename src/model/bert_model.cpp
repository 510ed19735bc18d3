#include "model/bert_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/check.h"
#include "kernels/float_matmul.h"
#include "kernels/kernel_table.h"
#include "kernels/quant_matmul.h"
#include "model/for_rows.h"

namespace radixserve::model {

Expected<std::unique_ptr<EncoderModel>> BertModel::Create(ModelConfig config, PoolingConfig pooling,
                                                          std::unique_ptr<WeightStore> weights,
                                                          ClassifierInfo classifier) {
  if (config.hidden_act != "gelu") {
    return Unsupported("BertModel: hidden_act " + config.hidden_act +
                       " is not supported (supported: gelu)");
  }
  if (config.num_kv_heads != config.num_heads ||
      config.head_dim * config.num_heads != config.hidden_size) {
    return InvalidArgument("BertModel: hidden_size must be num_attention_heads x head_dim");
  }
  if (config.context_length + config.position_offset > config.max_position_embeddings) {
    return InvalidArgument("BertModel: a context length of " +
                           std::to_string(config.context_length) + " exceeds the model's " +
                           std::to_string(config.max_position_embeddings) + " position embeddings");
  }
  if (config.type_vocab_size <= 0) {
    return InvalidArgument("BertModel: config needs a positive type_vocab_size");
  }
  std::unique_ptr<BertModel> model(
      new BertModel(std::move(config), pooling, std::move(weights), std::move(classifier)));
  RADIX_RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<EncoderModel>(std::move(model));
}

Expected<BertModel::Linear> BertModel::LoadLinear(const std::string& prefix, int64_t rows,
                                                  int64_t cols) {
  Linear l;
  kernels::WeightMatrix m;
  RADIX_ASSIGN_OR_RETURN(m, weights_->RequireMatrix(prefix + ".weight", rows, cols));
  RADIX_ASSIGN_OR_RETURN(l.bias, weights_->RequireVector(prefix + ".bias", rows));
  if (m.format == kernels::WeightFormat::kF32) {
    // F32 panels (kernels/float_matmul.h) serve every product; the source pages can go.
    l.w = kernels::Pack(kernels::ActiveKernels(), nullptr, m);
    weights_->DropSourcePages(m);
  } else {
    l.w.source = m;
  }
  return l;
}

Expected<BertModel::Norm> BertModel::LoadNorm(const std::string& prefix) {
  Norm n;
  RADIX_ASSIGN_OR_RETURN(n.weight,
                         weights_->RequireVector(prefix + ".weight", config_.hidden_size));
  RADIX_ASSIGN_OR_RETURN(n.bias, weights_->RequireVector(prefix + ".bias", config_.hidden_size));
  return n;
}

Status BertModel::Load() {
  const int64_t h = config_.hidden_size, ff = config_.intermediate_size;
  RADIX_ASSIGN_OR_RETURN(
      word_, weights_->RequireMatrix("embeddings.word_embeddings.weight", config_.vocab_size, h));
  RADIX_ASSIGN_OR_RETURN(position_, weights_->RequireMatrix("embeddings.position_embeddings.weight",
                                                            config_.max_position_embeddings, h));
  RADIX_ASSIGN_OR_RETURN(token_type_,
                         weights_->RequireMatrix("embeddings.token_type_embeddings.weight",
                                                 config_.type_vocab_size, h));
  RADIX_ASSIGN_OR_RETURN(embed_norm_, LoadNorm("embeddings.LayerNorm"));
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    Layer layer;
    RADIX_ASSIGN_OR_RETURN(layer.q, LoadLinear(p + "attention.self.query", h, h));
    RADIX_ASSIGN_OR_RETURN(layer.k, LoadLinear(p + "attention.self.key", h, h));
    RADIX_ASSIGN_OR_RETURN(layer.v, LoadLinear(p + "attention.self.value", h, h));
    RADIX_ASSIGN_OR_RETURN(layer.o, LoadLinear(p + "attention.output.dense", h, h));
    RADIX_ASSIGN_OR_RETURN(layer.attn_norm, LoadNorm(p + "attention.output.LayerNorm"));
    RADIX_ASSIGN_OR_RETURN(layer.up, LoadLinear(p + "intermediate.dense", ff, h));
    RADIX_ASSIGN_OR_RETURN(layer.down, LoadLinear(p + "output.dense", h, ff));
    RADIX_ASSIGN_OR_RETURN(layer.ffn_norm, LoadNorm(p + "output.LayerNorm"));
    layers_.push_back(std::move(layer));
  }
  if (!classifier_.labels.empty()) {
    RADIX_ASSIGN_OR_RETURN(pooler_, LoadLinear("pooler.dense", h, h));
    RADIX_ASSIGN_OR_RETURN(
        classifier_head_,
        LoadLinear("classifier", static_cast<int64_t>(classifier_.labels.size()), h));
  }
  return Status::Ok();
}

void BertModel::ApplyLinear(ThreadPool* pool, const Linear& l, const float* x, int64_t n,
                            float* y) const {
  kernels::MatMul(kernels::ActiveKernels(), pool, x, n, l.w, y);
  const int64_t rows = l.w.source.rows;
  ForRows(pool, n, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* row = y + t * rows;
      for (int64_t r = 0; r < rows; ++r) row[r] += l.bias[static_cast<size_t>(r)];
    }
  });
}

void BertModel::ApplyLayerNorm(ThreadPool* pool, const Norm& norm, float* x, int64_t n) const {
  const int64_t h = config_.hidden_size;
  const double eps = config_.layer_norm_eps;
  ForRows(pool, n, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* row = x + t * h;
      double mean = 0;
      for (int64_t d = 0; d < h; ++d) mean += row[d];
      mean /= static_cast<double>(h);
      double var = 0;
      for (int64_t d = 0; d < h; ++d) var += (row[d] - mean) * (row[d] - mean);
      var /= static_cast<double>(h);
      const double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t d = 0; d < h; ++d) {
        const size_t i = static_cast<size_t>(d);
        row[d] = static_cast<float>((row[d] - mean) * inv) * norm.weight[i] + norm.bias[i];
      }
    }
  });
}

void BertModel::Attention(ThreadPool* pool, const ForwardBatch& batch, const float* q,
                          const float* k, const float* v, float* out) const {
  const kernels::KernelTable& kt = kernels::ActiveKernels();
  const int64_t h = config_.hidden_size, hd = config_.head_dim, heads = config_.num_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<int64_t> starts;
  int64_t start = 0;
  for (const SequenceExtend& s : batch.sequences) {
    starts.push_back(start);
    start += s.extend_len;
  }
  // One (sequence, head) per work item, as two matrix products on F32 panels: scores = Q K^T
  // over the whole sequence (bidirectional: no mask), a softmax per row, then out = P V. The
  // head's K rows and V columns are packed straight from the projections (their row stride h).
  const kernels::FloatGemmKernels& fk = kernels::FloatKernelsFor(kt);
  const int64_t items = static_cast<int64_t>(batch.sequences.size()) * heads;
  auto run = [&](int64_t begin, int64_t end) {
    std::vector<float> kp, vp, scores;
    for (int64_t item = begin; item < end; ++item) {
      const size_t s = static_cast<size_t>(item / heads);
      const int64_t head = item % heads;
      const int64_t first = starts[s], len = batch.sequences[s].extend_len;
      const int64_t at = first * h + head * hd;
      kp.resize(static_cast<size_t>(kernels::F32PanelFloats(len, hd)));
      vp.resize(static_cast<size_t>(kernels::F32PanelFloats(hd, len)));
      scores.resize(static_cast<size_t>(len * len));
      kernels::PackF32Panels(k + at, h, len, hd, false, kp.data());
      kernels::PackF32Panels(v + at, h, hd, len, true, vp.data());
      kernels::F32PanelMatMul(fk, nullptr, q + at, h, len, kp.data(), len, hd, scores.data(), len);
      for (int64_t i = 0; i < len; ++i) {
        float* row = scores.data() + i * len;
        for (int64_t j2 = 0; j2 < len; ++j2) row[j2] *= scale;
        kt.softmax(row, len);
      }
      kernels::F32PanelMatMul(fk, nullptr, scores.data(), len, len, vp.data(), hd, len, out + at,
                              h);
    }
  };
  if (pool == nullptr || pool->size() == 1) {
    run(0, items);
  } else {
    pool->ParallelFor(items, 1, run);
  }
}

Status BertModel::Encode(const ForwardBatch& batch, ThreadPool* pool, float* hidden) const {
  const int64_t n = batch.num_tokens(), h = config_.hidden_size;
  RADIX_CHECK(static_cast<int64_t>(batch.positions.size()) == n);
  int64_t total = 0;
  for (const SequenceExtend& s : batch.sequences) {
    RADIX_CHECK(s.prefix_len == 0 && s.extend_len > 0);
    total += s.extend_len;
  }
  RADIX_CHECK(total == n);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = batch.token_ids[static_cast<size_t>(t)];
    const int64_t pos = batch.positions[static_cast<size_t>(t)];
    if (id < 0 || id >= config_.vocab_size) {
      return InvalidArgument("token id " + std::to_string(id) + " is out of the vocabulary [0, " +
                             std::to_string(config_.vocab_size) + ")");
    }
    if (pos < 0 || pos >= config_.context_length) {
      return InvalidArgument("position " + std::to_string(pos) + " is beyond the model's " +
                             std::to_string(config_.context_length) + " position embeddings");
    }
  }
  const bool typed = !batch.token_type_ids.empty();
  RADIX_CHECK(!typed || static_cast<int64_t>(batch.token_type_ids.size()) == n);
  for (int32_t type : batch.token_type_ids) {
    if (type < 0 || type >= config_.type_vocab_size) {
      return InvalidArgument("token type " + std::to_string(type) + " is out of range [0, " +
                             std::to_string(config_.type_vocab_size) + ")");
    }
  }
  ForRows(pool, n, [&](int64_t begin, int64_t end) {
    std::vector<float> pos_row(static_cast<size_t>(h)), type_row(static_cast<size_t>(h));
    int32_t loaded_type = -1;
    for (int64_t t = begin; t < end; ++t) {
      const int32_t type = typed ? batch.token_type_ids[static_cast<size_t>(t)] : 0;
      if (type != loaded_type) {
        kernels::DequantizeRow(token_type_, type, type_row.data());
        loaded_type = type;
      }
      float* row = hidden + t * h;
      kernels::DequantizeRow(word_, batch.token_ids[static_cast<size_t>(t)], row);
      kernels::DequantizeRow(position_,
                             batch.positions[static_cast<size_t>(t)] + config_.position_offset,
                             pos_row.data());
      for (int64_t d = 0; d < h; ++d) {
        row[d] += pos_row[static_cast<size_t>(d)] + type_row[static_cast<size_t>(d)];
      }
    }
  });
  ApplyLayerNorm(pool, embed_norm_, hidden, n);

  const int64_t ff = config_.intermediate_size;
  std::vector<float> q(static_cast<size_t>(n * h)), k(q.size()), v(q.size()), attn(q.size()),
      proj(q.size()), up(static_cast<size_t>(n * ff));
  for (const Layer& layer : layers_) {
    ApplyLinear(pool, layer.q, hidden, n, q.data());
    ApplyLinear(pool, layer.k, hidden, n, k.data());
    ApplyLinear(pool, layer.v, hidden, n, v.data());
    Attention(pool, batch, q.data(), k.data(), v.data(), attn.data());
    ApplyLinear(pool, layer.o, attn.data(), n, proj.data());
    for (size_t i = 0; i < proj.size(); ++i) hidden[i] += proj[i];
    ApplyLayerNorm(pool, layer.attn_norm, hidden, n);
    ApplyLinear(pool, layer.up, hidden, n, up.data());
    ForRows(pool, n, [&](int64_t begin, int64_t end) {
      // HF's "gelu" activation: the exact form with erf, not the tanh approximation.
      kernels::ActiveKernels().gelu_erf(up.data() + begin * ff, up.data() + begin * ff,
                                        (end - begin) * ff);
    });
    ApplyLinear(pool, layer.down, up.data(), n, proj.data());
    for (size_t i = 0; i < proj.size(); ++i) hidden[i] += proj[i];
    ApplyLayerNorm(pool, layer.ffn_norm, hidden, n);
  }
  return Status::Ok();
}

Status BertModel::Embed(const ForwardBatch& batch, ThreadPool* pool, float* out) const {
  std::vector<float> hidden(static_cast<size_t>(batch.num_tokens() * config_.hidden_size));
  RADIX_RETURN_IF_ERROR(Encode(batch, pool, hidden.data()));
  std::vector<int64_t> lengths;
  for (const SequenceExtend& s : batch.sequences) lengths.push_back(s.extend_len);
  if (classifier_.labels.empty()) {
    Pool(pooling_, hidden.data(), config_.hidden_size, lengths, out);
    return Status::Ok();
  }
  // Cross-encoder: each sequence's [CLS] state -> pooler dense + tanh -> classifier.
  const int64_t h = config_.hidden_size, n = static_cast<int64_t>(lengths.size());
  std::vector<float> cls(static_cast<size_t>(n * h)), pooled(cls.size());
  int64_t start = 0;
  for (int64_t s = 0; s < n; ++s) {
    std::copy_n(hidden.begin() + start * h, h, cls.begin() + s * h);
    start += lengths[static_cast<size_t>(s)];
  }
  ApplyLinear(pool, pooler_, cls.data(), n, pooled.data());
  for (float& v : pooled) v = std::tanh(v);
  ApplyLinear(pool, classifier_head_, pooled.data(), n, out);
  return Status::Ok();
}

}  // namespace radixserve::model

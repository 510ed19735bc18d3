#include "model/decoder_pooler.h"

#include <numeric>
#include <span>

#include "common/check.h"

namespace radixserve::model {

DecoderPooler::DecoderPooler(std::unique_ptr<CausalLM> decoder, PoolingConfig pooling,
                             std::unique_ptr<ClassifierHead> head)
    : decoder_(std::move(decoder)), pooling_(pooling), head_(std::move(head)) {
  RADIX_CHECK(decoder_->config().hidden_states_only);
  if (head_) pooling_ = PoolingConfig{.mode = PoolingMode::kLastToken, .normalize = false};
}

int64_t DecoderPooler::weight_bytes() const {
  const int64_t head = head_ ? static_cast<int64_t>(head_->weight.size() + head_->bias.size()) *
                                   static_cast<int64_t>(sizeof(float))
                             : 0;
  return decoder_->weight_bytes() + head;
}

int64_t DecoderPooler::embedding_dim() const {
  return head_ ? static_cast<int64_t>(head_->info.labels.size()) : decoder_->config().hidden_size;
}

Status DecoderPooler::Embed(const ForwardBatch& batch, ThreadPool* pool, float* out) const {
  const ModelConfig& c = decoder_->config();
  const int64_t T = batch.num_tokens(), H = c.hidden_size;
  for (int64_t p : batch.positions) {
    if (p < 0 || p >= c.context_length) {
      return InvalidArgument("position " + std::to_string(p) + " is out of range [0, " +
                             std::to_string(c.context_length) + ")");
    }
  }
  // The rows each sequence contributes: all of its tokens (mean pooling) or one.
  const bool all_rows = pooling_.mode == PoolingMode::kMean;
  std::vector<int64_t> lengths;
  for (const SequenceExtend& seq : batch.sequences) {
    RADIX_CHECK(seq.prefix_len == 0 && seq.extend_len >= 1);
    lengths.push_back(all_rows ? seq.extend_len : 1);
  }
  const int64_t total_rows = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  std::vector<float> hidden(static_cast<size_t>(total_rows * H));
  // Groups of whole sequences, each at most kScratchTokens tokens (a longer sequence runs alone),
  // so the scratch K/V holds max(kScratchTokens, longest sequence) positions, not the batch.
  std::vector<int32_t> slots;
  size_t s0 = 0;
  int64_t token0 = 0, row0 = 0;
  std::lock_guard<std::mutex> lock(mu_);
  while (s0 < batch.sequences.size()) {
    size_t s1 = s0;
    int64_t tokens = 0;
    while (s1 < batch.sequences.size() &&
           (s1 == s0 || tokens + batch.sequences[s1].extend_len <= kScratchTokens)) {
      tokens += batch.sequences[s1++].extend_len;
    }
    slots.resize(static_cast<size_t>(tokens));
    std::iota(slots.begin(), slots.end(), 0);
    ForwardBatch run;
    run.token_ids.assign(batch.token_ids.begin() + token0,
                         batch.token_ids.begin() + token0 + tokens);
    run.positions.assign(batch.positions.begin() + token0,
                         batch.positions.begin() + token0 + tokens);
    int64_t start = 0;
    for (size_t s = s0; s < s1; ++s) {
      const int64_t len = batch.sequences[s].extend_len;
      run.sequences.push_back(
          SequenceExtend{.prefix_len = 0,
                         .extend_len = len,
                         .kv_slots = std::span<const int32_t>(slots).subspan(
                             static_cast<size_t>(start), static_cast<size_t>(len)),
                         .lora = nullptr});
      if (all_rows) {
        for (int64_t t = 0; t < len; ++t) run.logit_indices.push_back(start + t);
      } else {
        run.logit_indices.push_back(pooling_.mode == PoolingMode::kCls ? start : start + len - 1);
      }
      start += len;
    }
    if (kv_ == nullptr || kv_->view().num_slots < tokens) {
      kv_ = std::make_unique<KvCacheBuffers>(c.num_layers, tokens, c.num_kv_heads, c.head_dim);
    }
    RADIX_RETURN_IF_ERROR(
        decoder_->ForwardHidden(run, kv_->view(), pool, hidden.data() + row0 * H));
    row0 += static_cast<int64_t>(run.logit_indices.size());
    token0 += tokens;
    s0 = s1;
  }
  RADIX_CHECK(token0 == T && row0 == total_rows);
  if (!head_) {
    Pool(pooling_, hidden.data(), H, lengths, out);
    return Status::Ok();
  }
  // One row per sequence: the last token's hidden state through the score head.
  const auto num_labels = static_cast<int64_t>(head_->info.labels.size());
  for (size_t s = 0; s < lengths.size(); ++s) {
    const float* h = hidden.data() + s * static_cast<size_t>(H);
    for (int64_t k = 0; k < num_labels; ++k) {
      const float* w = head_->weight.data() + k * H;
      double sum = head_->bias.empty() ? 0.0 : head_->bias[static_cast<size_t>(k)];
      for (int64_t d = 0; d < H; ++d) sum += static_cast<double>(w[d]) * h[d];
      out[static_cast<int64_t>(s) * num_labels + k] = static_cast<float>(sum);
    }
  }
  return Status::Ok();
}

}  // namespace radixserve::model

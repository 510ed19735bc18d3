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
  // Sequence s owns slots [start_s, start_s + len_s) of the scratch K/V.
  std::vector<int32_t> slots(static_cast<size_t>(T));
  std::iota(slots.begin(), slots.end(), 0);
  ForwardBatch run;
  run.token_ids = batch.token_ids;
  run.positions = batch.positions;
  std::vector<int64_t> lengths;
  const bool all_rows = pooling_.mode == PoolingMode::kMean;
  int64_t start = 0;
  for (const SequenceExtend& seq : batch.sequences) {
    RADIX_CHECK(seq.prefix_len == 0 && seq.extend_len >= 1);
    run.sequences.push_back(SequenceExtend{
        .prefix_len = 0,
        .extend_len = seq.extend_len,
        .kv_slots = std::span<const int32_t>(slots).subspan(static_cast<size_t>(start),
                                                            static_cast<size_t>(seq.extend_len)),
        .lora = nullptr});
    if (all_rows) {
      for (int64_t t = 0; t < seq.extend_len; ++t) run.logit_indices.push_back(start + t);
      lengths.push_back(seq.extend_len);
    } else {
      run.logit_indices.push_back(pooling_.mode == PoolingMode::kCls ? start
                                                                     : start + seq.extend_len - 1);
      lengths.push_back(1);
    }
    start += seq.extend_len;
  }
  RADIX_CHECK(start == T);
  std::vector<float> hidden(run.logit_indices.size() * static_cast<size_t>(H));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (kv_ == nullptr || kv_->view().num_slots < T) {
      kv_ = std::make_unique<KvCacheBuffers>(c.num_layers, T, c.num_kv_heads, c.head_dim);
    }
    RADIX_RETURN_IF_ERROR(decoder_->ForwardHidden(run, kv_->view(), pool, hidden.data()));
  }
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

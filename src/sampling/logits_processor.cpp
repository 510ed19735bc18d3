#include "sampling/logits_processor.h"

#include <limits>

#include "common/check.h"
#include "sampling/token_bitmask.h"

namespace radixserve::sampling {

LogitsProcessor::LogitsProcessor(int32_t vocab_size)
    : vocab_size_(vocab_size), counts_(static_cast<size_t>(vocab_size), 0) {
  RADIX_CHECK(vocab_size > 0);
}

void LogitsProcessor::ApplyPenalties(std::span<float> logits, const SamplingParams& params,
                                     std::span<const int32_t> output_ids) {
  const double freq = params.frequency_penalty;
  const double pres = params.presence_penalty;
  const double rep = params.repetition_penalty;
  const bool use_rep = rep != 1.0 && rep > 0.0;
  if (output_ids.empty() || (freq == 0.0 && pres == 0.0 && !use_rep)) return;

  for (int32_t id : output_ids) {
    if (id >= 0 && id < vocab_size_) ++counts_[static_cast<size_t>(id)];
  }
  // Second pass: each distinct token is penalized once (at its first occurrence) and its count
  // reset, which leaves the scratch all-zero for the next row.
  for (int32_t id : output_ids) {
    if (id < 0 || id >= vocab_size_) continue;
    uint32_t& count = counts_[static_cast<size_t>(id)];
    if (count == 0) continue;
    double logit = logits[static_cast<size_t>(id)];
    if (use_rep) logit = logit > 0.0 ? logit / rep : logit * rep;
    logit -= freq * static_cast<double>(count);
    logit -= pres;
    logits[static_cast<size_t>(id)] = static_cast<float>(logit);
    count = 0;
  }
}

void LogitsProcessor::ProcessRow(std::span<float> logits, const LogitsRowContext& row) {
  RADIX_CHECK(row.params != nullptr);
  RADIX_CHECK(logits.size() == static_cast<size_t>(vocab_size_));
  const SamplingParams& params = *row.params;

  ApplyPenalties(logits, params, row.output_ids);

  if (static_cast<int64_t>(row.output_ids.size()) < params.min_new_tokens) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    for (int32_t id : params.stop_token_ids) {
      if (id >= 0 && id < vocab_size_) logits[static_cast<size_t>(id)] = kNegInf;
    }
    for (int32_t id : row.eos_token_ids) {
      if (id >= 0 && id < vocab_size_) logits[static_cast<size_t>(id)] = kNegInf;
    }
  }

  if (!row.allowed_tokens.empty()) ApplyTokenBitmask(row.allowed_tokens, logits);

  // Keys naming the same token ("7", "07") do not add up: the last one wins, as SGLang assigns
  // them into a bias tensor. Walk backwards and mark applied ids in the (all-zero) scratch.
  const auto& bias = params.logit_bias;
  for (auto it = bias.rbegin(); it != bias.rend(); ++it) {
    if (!it->token_id || *it->token_id < 0 || *it->token_id >= vocab_size_) continue;
    const auto id = static_cast<size_t>(*it->token_id);
    if (counts_[id] != 0) continue;
    counts_[id] = 1;
    logits[id] = static_cast<float>(static_cast<double>(logits[id]) + it->bias);
  }
  for (const LogitBiasEntry& entry : bias) {
    if (entry.token_id && *entry.token_id >= 0 && *entry.token_id < vocab_size_) {
      counts_[static_cast<size_t>(*entry.token_id)] = 0;
    }
  }
}

void LogitsProcessor::ProcessBatch(std::span<float> logits,
                                   std::span<const LogitsRowContext> rows) {
  const size_t vocab = static_cast<size_t>(vocab_size_);
  RADIX_CHECK(logits.size() == rows.size() * vocab);
  for (size_t r = 0; r < rows.size(); ++r) {
    ProcessRow(logits.subspan(r * vocab, vocab), rows[r]);
  }
}

}  // namespace radixserve::sampling

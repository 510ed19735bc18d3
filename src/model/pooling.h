// Pooling: how an encoder's per-token hidden states become one embedding per sequence, as a
// sentence-transformers model folder declares it (modules.json lists the modules in order; the
// Pooling module's config.json picks the mode; a Normalize module L2-normalizes the result).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"

namespace radixserve::model {

enum class PoolingMode { kMean, kCls, kLastToken };

struct PoolingConfig {
  PoolingMode mode = PoolingMode::kCls;
  bool normalize = false;
};

// "mean", "cls", "lasttoken" (sentence-transformers' pooling_mode names).
const char* PoolingModeName(PoolingMode mode);

// Reads `folder`/modules.json and its Pooling module's config.json. A folder without
// modules.json gets `fallback` (SGLang pools BERT by CLS without normalization then). Pooling
// modes radixserve does not compute (max, mean_sqrt_len_tokens, weightedmean, several at once)
// and module types it does not know give Unsupported naming the file; malformed JSON DataLoss.
Expected<PoolingConfig> LoadPoolingConfig(const std::string& folder, PoolingConfig fallback);

// Pools hidden [num_tokens, dim] (sequences back to back, lengths in `lengths`, each >= 1) into
// out [lengths.size(), dim]; L2-normalizes each row when config.normalize.
void Pool(const PoolingConfig& config, const float* hidden, int64_t dim,
          std::span<const int64_t> lengths, float* out);

}  // namespace radixserve::model

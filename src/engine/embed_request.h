// EmbedRequest / EmbedResult: one input of an embedding call (the API layer submits one request
// per input) and what the engine answers. Built on an HTTP thread, moved into
// Engine::SubmitEmbed, read by the engine thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace radixserve::engine {

struct EmbedRequest {
  std::string rid;
  std::vector<int32_t> input_ids;  // tokenized, special tokens included, within the context
  // A cross-encoder pair's segments (aligned with input_ids); empty: all 0.
  std::vector<int32_t> token_type_ids;
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
};

struct EmbedResult {
  Status status;                 // not ok: no embedding (aborted, bad token id, shutdown)
  std::vector<float> embedding;  // pooled (and normalized if the model says so)
  int64_t prompt_tokens = 0;
};

// Receives the one result of a request, on the engine thread; must return quickly.
using EmbedSink = std::function<void(EmbedResult)>;

}  // namespace radixserve::engine

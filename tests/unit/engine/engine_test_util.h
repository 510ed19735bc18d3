// Shared fixtures of the engine tests: the stories260K model and tokenizer, an independent greedy
// reference (CausalLM::Forward over a private KV buffer, one request at a time, no scheduler, no
// pools, no prefix cache) and a collector that waits for requests to finish.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "args/server_args.h"
#include "common/thread_pool.h"
#include "engine/engine.h"
#include "engine/engine_factory.h"
#include "model/kv_cache_view.h"
#include "model/model_loader.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer_loader.h"

namespace radixserve::engine::testing {

inline const std::string kStoriesGguf =
    std::string(RADIX_SHARED_DIR) + "/models/stories260K/gguf/stories260K.gguf";

struct Stories {
  std::shared_ptr<const model::CausalLM> model;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
};

inline const Stories& LoadStories() {
  static const Stories stories = [] {
    model::LoadOptions options;
    options.model_path = kStoriesGguf;
    auto model = model::LoadModel(options);
    RADIX_CHECK_MSG(model.ok(), model.status().message().c_str());
    auto tok = tokenizer::LoadTokenizer(kStoriesGguf);
    RADIX_CHECK_MSG(tok.ok(), tok.status().message().c_str());
    return Stories{std::shared_ptr<const model::CausalLM>(std::move(model).value()),
                   std::shared_ptr<const tokenizer::Tokenizer>(std::move(tok).value())};
  }();
  return stories;
}

inline ThreadPool* TestPool() {
  static ThreadPool pool(1);
  return &pool;
}

// Greedy continuation of `prompt` computed directly with the model: the prompt in one forward
// pass, then one token per pass, argmax with ties to the lowest id.
inline std::vector<int32_t> ReferenceGreedy(const std::vector<int32_t>& prompt, int64_t max_new) {
  const model::CausalLM& lm = *LoadStories().model;
  const model::ModelConfig& c = lm.config();
  const int64_t slots = static_cast<int64_t>(prompt.size()) + max_new + 2;
  model::KvCacheBuffers kv(c.num_layers, slots, c.num_kv_heads, c.head_dim);
  std::vector<int32_t> slot_table;
  for (int64_t i = 0; i < slots; ++i) slot_table.push_back(static_cast<int32_t>(i + 1));
  std::vector<int32_t> out;
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  std::vector<int32_t> pending = prompt;
  int64_t done = 0;
  while (static_cast<int64_t>(out.size()) < max_new) {
    model::ForwardBatch batch;
    for (size_t i = 0; i < pending.size(); ++i) {
      batch.token_ids.push_back(pending[i]);
      batch.positions.push_back(done + static_cast<int64_t>(i));
    }
    model::SequenceExtend seq;
    seq.prefix_len = done;
    seq.extend_len = static_cast<int64_t>(pending.size());
    seq.kv_slots =
        std::span<const int32_t>(slot_table.data(), static_cast<size_t>(done + seq.extend_len));
    batch.sequences.push_back(seq);
    batch.logit_indices.push_back(seq.extend_len - 1);
    Status status = lm.Forward(batch, kv.view(), TestPool(), logits.data());
    RADIX_CHECK(status.ok());
    done += seq.extend_len;
    const int32_t token = sampling::ArgmaxLowestId(logits);
    out.push_back(token);
    pending = {token};
  }
  return out;
}

// Collects every request's events; Wait blocks until `count` requests have finished.
class Collector {
 public:
  struct Result {
    std::vector<int32_t> tokens;
    std::string text;
    std::vector<RequestEvent> events;
    bool finished = false;
    std::optional<FinishReason> finish;
    int64_t cached_tokens = 0;
  };

  explicit Collector(size_t n) : results_(n) {}

  EventSink Sink(size_t i) {
    return [this, i](RequestEvent event) {
      std::lock_guard<std::mutex> lock(mutex_);
      Result& r = results_[i];
      EXPECT_FALSE(r.finished) << "event after the final event";
      r.tokens.insert(r.tokens.end(), event.new_token_ids.begin(), event.new_token_ids.end());
      r.text += event.text_delta;
      r.cached_tokens = event.cached_tokens;
      if (event.finished) {
        r.finished = true;
        r.finish = event.finish_reason;
        ++finished_;
        cv_.notify_all();
      }
      r.events.push_back(std::move(event));
    };
  }

  void Wait(size_t count) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return finished_ >= count; });
  }

  const Result& operator[](size_t i) const { return results_[i]; }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Result> results_;
  size_t finished_ = 0;
};

inline args::ServerArgs BaseArgs() {
  args::ServerArgs args;
  args.Set("sleep-on-idle", true);
  args.Set("random-seed", 0);
  args.Set("max-total-tokens", 8192);
  args.Set("page-size", 1);
  args.Set("chunked-prefill-size", 4096);
  return args;
}

inline std::unique_ptr<Engine> MakeEngine(const args::ServerArgs& args) {
  auto engine = CreateEngine(args, LoadStories().model, LoadStories().tokenizer, TestPool());
  RADIX_CHECK_MSG(engine.ok(), engine.status().message().c_str());
  return std::move(engine).value();
}

inline GenerateRequest GreedyRequest(std::string rid, std::vector<int32_t> prompt,
                                     int64_t max_new) {
  GenerateRequest request;
  request.rid = std::move(rid);
  request.input_ids = std::move(prompt);
  request.sampling.temperature = 1.0;
  request.sampling.top_k = 1;
  request.sampling.max_new_tokens = max_new;
  request.sampling.ignore_eos = true;
  return request;
}

}  // namespace radixserve::engine::testing

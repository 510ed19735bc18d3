// EmbeddingEngine: the engine of an embedding server (--is-embedding, or an encoder model). Every
// request is prefill-only: its whole input goes through the encoder in one forward pass and
// nothing is kept afterwards (no KV pool, no prefix cache — bidirectional attention makes a
// cached prefix depend on what follows it).
//
// One engine thread owns the queue. Each step it takes queued requests in arrival order up to the
// step's token budget (--max-prefill-tokens; a single longer request still runs alone) and the
// request cap (--max-running-requests), embeds them as one batch, and answers their sinks.
// Requests that arrive while a batch runs join the next one, so concurrent callers batch.
//
// Thread safety: as Engine (every public method from any thread; sinks run on the engine thread).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/thread_pool.h"
#include "engine/engine.h"
#include "model/encoder_model.h"

namespace radixserve::engine {

struct EmbeddingEngineConfig {
  int64_t max_batch_tokens = 16384;  // token budget of one step
  int64_t max_batch_requests = 256;  // requests in one step
  int64_t max_queued_requests = 0;   // 0: unbounded; else Submit beyond it -> kResourceExhausted
};

class EmbeddingEngine final : public Engine {
 public:
  // `model` and `pool` must outlive the engine (pool: the compute pool shared with nothing else
  // that runs concurrently).
  EmbeddingEngine(std::shared_ptr<const model::EncoderModel> model, ThreadPool* pool,
                  EmbeddingEngineConfig config);
  ~EmbeddingEngine() override;

  Status Submit(GenerateRequest request, EventSink sink) override;
  Status SubmitEmbed(EmbedRequest request, EmbedSink sink) override;
  void Abort(std::string_view rid, AbortMatch match) override;
  void FlushCacheAsync(std::function<void(Status)> done) override;
  // Every mode holds the queue until Continue (nothing is kept between steps, so retract and
  // in_place mean the same); kAbort also aborts what is queued. Done once the running batch ends.
  void PauseAsync(PauseMode mode, std::function<void()> done) override;
  void Continue() override;
  EngineStats Stats() const override;
  Status CheckLeaks() const override { return Status::Ok(); }
  void Shutdown() override;

 private:
  struct Pending {
    EmbedRequest request;
    EmbedSink sink;
  };
  void Loop();

  std::shared_ptr<const model::EncoderModel> model_;
  ThreadPool* pool_;
  EmbeddingEngineConfig config_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  int64_t running_ = 0;
  int64_t prompt_tokens_total_ = 0;
  bool stopping_ = false;
  bool paused_ = false;
  std::vector<std::function<void()>> pause_waiters_;  // paused while a batch ran
  std::thread thread_;
};

}  // namespace radixserve::engine

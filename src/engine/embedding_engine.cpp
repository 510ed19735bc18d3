#include "engine/embedding_engine.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/check.h"

namespace radixserve::engine {

EmbeddingEngine::EmbeddingEngine(std::shared_ptr<const model::EncoderModel> model, ThreadPool* pool,
                                 EmbeddingEngineConfig config)
    : model_(std::move(model)), pool_(pool), config_(config) {
  thread_ = std::thread([this] { Loop(); });
}

EmbeddingEngine::~EmbeddingEngine() { Shutdown(); }

Status EmbeddingEngine::Submit(GenerateRequest, EventSink) {
  return InvalidArgument(
      "This server serves an embedding model (--is-embedding); generation routes are not "
      "available. Use /v1/embeddings or /encode.");
}

Status EmbeddingEngine::SubmitEmbed(EmbedRequest request, EmbedSink sink) {
  if (request.input_ids.empty()) return InvalidArgument("The input is empty.");
  const int64_t context = model_->config().context_length;
  if (static_cast<int64_t>(request.input_ids.size()) > context) {
    return InvalidArgument("The input (" + std::to_string(request.input_ids.size()) +
                           " tokens) is longer than the model's context length (" +
                           std::to_string(context) + " tokens).");
  }
  if (!request.token_type_ids.empty() &&
      request.token_type_ids.size() != request.input_ids.size()) {
    return InvalidArgument("token_type_ids must have one entry per input token.");
  }
  const int64_t vocab = model_->config().vocab_size;
  for (int32_t id : request.input_ids) {
    if (id < 0 || id >= vocab) {
      return InvalidArgument("Token id " + std::to_string(id) + " is out of the vocabulary [0, " +
                             std::to_string(vocab) + ").");
    }
  }
  std::lock_guard lock(mu_);
  if (stopping_) return Status(StatusCode::kResourceExhausted, "The server is shutting down.");
  if (config_.max_queued_requests > 0 &&
      static_cast<int64_t>(queue_.size()) >= config_.max_queued_requests) {
    return Status(StatusCode::kResourceExhausted, "The request queue is full.");
  }
  queue_.push_back({std::move(request), std::move(sink)});
  wake_.notify_one();
  return Status::Ok();
}

void EmbeddingEngine::Abort(std::string_view rid, AbortMatch match) {
  std::vector<Pending> aborted;
  {
    std::lock_guard lock(mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      const std::string& r = it->request.rid;
      const bool hit = match == AbortMatch::kExactRid ? r == rid : r.rfind(rid, 0) == 0;
      if (hit) {
        aborted.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // A request already in the running batch finishes with it (within one step).
  for (Pending& p : aborted) p.sink({InvalidArgument("The request was aborted."), {}, 0});
}

void EmbeddingEngine::FlushCacheAsync(std::function<void(Status)> done) {
  // Nothing is cached between requests.
  done(Status::Ok());
}

void EmbeddingEngine::PauseAsync(PauseMode mode, std::function<void()> done) {
  if (mode == PauseMode::kAbort) Abort("", AbortMatch::kRidPrefix);
  {
    std::lock_guard lock(mu_);
    paused_ = true;
    if (running_ > 0 && !stopping_) {
      pause_waiters_.push_back(std::move(done));
      return;
    }
  }
  done();
}

void EmbeddingEngine::Continue() {
  std::lock_guard lock(mu_);
  paused_ = false;
  wake_.notify_all();
}

EngineStats EmbeddingEngine::Stats() const {
  std::lock_guard lock(mu_);
  EngineStats s;
  s.num_running_reqs = running_;
  s.num_queued_reqs = static_cast<int64_t>(queue_.size());
  s.max_running_requests = config_.max_batch_requests;
  s.max_total_num_tokens = config_.max_batch_tokens;
  s.context_len = model_->config().context_length;
  s.prompt_tokens_total = prompt_tokens_total_;
  s.paused = paused_;
  return s;
}

void EmbeddingEngine::Shutdown() {
  std::deque<Pending> left;
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    left.swap(queue_);
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::vector<std::function<void()>> paused;
  {
    std::lock_guard lock(mu_);
    paused.swap(pause_waiters_);
  }
  for (auto& done : paused) done();
  for (Pending& p : left)
    p.sink({Status(StatusCode::kResourceExhausted, "The server is shutting down."), {}, 0});
}

void EmbeddingEngine::Loop() {
  const int64_t dim = model_->embedding_dim();
  while (true) {
    std::vector<Pending> batch;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || (!paused_ && !queue_.empty()); });
      if (stopping_) return;
      int64_t tokens = 0;
      while (!queue_.empty() && static_cast<int64_t>(batch.size()) < config_.max_batch_requests) {
        const int64_t len = static_cast<int64_t>(queue_.front().request.input_ids.size());
        if (!batch.empty() && tokens + len > config_.max_batch_tokens) break;
        tokens += len;
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      running_ = static_cast<int64_t>(batch.size());
      prompt_tokens_total_ += tokens;
    }
    model::ForwardBatch fb;
    const bool typed = std::any_of(batch.begin(), batch.end(), [](const Pending& p) {
      return !p.request.token_type_ids.empty();
    });
    for (const Pending& p : batch) {
      const auto& ids = p.request.input_ids;
      fb.token_ids.insert(fb.token_ids.end(), ids.begin(), ids.end());
      if (typed) {
        const auto& types = p.request.token_type_ids;
        RADIX_CHECK(types.empty() || types.size() == ids.size());
        if (types.empty()) {
          fb.token_type_ids.insert(fb.token_type_ids.end(), ids.size(), 0);
        } else {
          fb.token_type_ids.insert(fb.token_type_ids.end(), types.begin(), types.end());
        }
      }
      for (size_t i = 0; i < ids.size(); ++i) fb.positions.push_back(static_cast<int64_t>(i));
      fb.sequences.push_back({0, static_cast<int64_t>(ids.size()), {}});
    }
    std::vector<float> out(batch.size() * static_cast<size_t>(dim));
    Status status = model_->Embed(fb, pool_, out.data());
    for (size_t i = 0; i < batch.size(); ++i) {
      EmbedResult result;
      result.status = status;
      result.prompt_tokens = static_cast<int64_t>(batch[i].request.input_ids.size());
      if (status.ok()) {
        result.embedding.assign(out.begin() + static_cast<int64_t>(i) * dim,
                                out.begin() + static_cast<int64_t>(i + 1) * dim);
      }
      batch[i].sink(std::move(result));
    }
    std::vector<std::function<void()>> paused;
    {
      std::lock_guard lock(mu_);
      running_ = 0;
      paused.swap(pause_waiters_);
    }
    for (auto& done : paused) done();
  }
}

}  // namespace radixserve::engine

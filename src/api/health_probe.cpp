#include "api/health_probe.h"

namespace radixserve::api {

HealthProbe::HealthProbe(engine::Engine* engine, std::chrono::milliseconds timeout)
    : engine_(engine), timeout_(timeout), timer_([this] { TimerLoop(); }) {}

HealthProbe::~HealthProbe() {
  uint64_t generation = 0;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    generation = generation_;
  }
  cv_.notify_all();
  timer_.join();
  Answer(generation, 503);
}

uint64_t HealthProbe::probes_started() const {
  std::lock_guard lock(mu_);
  return generation_;
}

void HealthProbe::Check(ResponseWriterPtr writer, const std::string& rid) {
  uint64_t generation = 0;
  {
    std::lock_guard lock(mu_);
    waiters_.push_back(std::move(writer));
    if (in_flight_) return;
    in_flight_ = true;
    generation = ++generation_;
    rid_ = rid;
    deadline_ = std::chrono::steady_clock::now() + timeout_;
  }
  cv_.notify_all();
  engine::GenerateRequest request;
  request.rid = rid;
  request.input_ids = {0};
  request.sampling.max_new_tokens = 1;
  request.sampling.top_k = 1;
  request.detokenize = false;
  Status submitted =
      engine_->Submit(std::move(request), [this, generation](engine::RequestEvent event) {
        const bool failed = event.finished && event.finish_reason &&
                            event.finish_reason->kind == engine::FinishKind::kAbort;
        Answer(generation, failed ? 503 : 200);
      });
  if (!submitted.ok()) Answer(generation, 503);
}

void HealthProbe::Answer(uint64_t generation, int status) {
  std::vector<ResponseWriterPtr> waiters;
  {
    std::lock_guard lock(mu_);
    if (generation != generation_ || !in_flight_) return;  // answered already
    in_flight_ = false;
    waiters.swap(waiters_);
  }
  for (const ResponseWriterPtr& writer : waiters) writer->Send(status, "text/plain", "");
}

void HealthProbe::TimerLoop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (!in_flight_) {
      cv_.wait(lock);
      continue;
    }
    if (cv_.wait_until(lock, deadline_) != std::cv_status::timeout) continue;
    if (!in_flight_ || std::chrono::steady_clock::now() < deadline_) continue;
    const uint64_t generation = generation_;
    const std::string rid = rid_;
    lock.unlock();
    engine_->Abort(rid, engine::AbortMatch::kExactRid);
    Answer(generation, 503);
    lock.lock();
  }
}

}  // namespace radixserve::api

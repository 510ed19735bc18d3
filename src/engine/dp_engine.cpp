#include "engine/dp_engine.h"

#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <string>

#include "common/check.h"

namespace radixserve::engine {

DpEngine::DpEngine(std::vector<std::unique_ptr<ThreadPool>> pools,
                   std::vector<std::unique_ptr<Engine>> replicas, LoadBalanceMethod method)
    : pools_(std::move(pools)),
      replicas_(std::move(replicas)),
      balancer_(method, static_cast<int>(replicas_.size())) {
  RADIX_CHECK(!replicas_.empty());
}

DpEngine::~DpEngine() { Shutdown(); }

Status DpEngine::Submit(GenerateRequest request, EventSink sink) {
  const auto prompt_tokens = static_cast<int64_t>(request.input_ids.size());
  std::optional<int> routed;
  if (request.routed_dp_rank) {
    if (*request.routed_dp_rank < 0 ||
        static_cast<size_t>(*request.routed_dp_rank) >= replicas_.size()) {
      return InvalidArgument(fmt::format("routed_dp_rank {} is out of range: --dp-size is {}.",
                                         *request.routed_dp_rank, replicas_.size()));
    }
    routed = *request.routed_dp_rank;
  }
  const int replica = balancer_.Assign(prompt_tokens, routed);
  // The sink runs on the replica's engine thread, one event at a time, so `counted` needs no
  // lock; the balancer outlives every engine thread (Shutdown joins them).
  EventSink counting = [this, replica, counted = prompt_tokens,
                        sink = std::move(sink)](RequestEvent event) mutable {
    const auto produced = static_cast<int64_t>(event.new_token_ids.size());
    if (produced > 0) {
      balancer_.AddTokens(replica, produced);
      counted += produced;
    }
    if (event.finished) balancer_.Release(replica, counted);
    sink(std::move(event));
  };
  Status status =
      replicas_[static_cast<size_t>(replica)]->Submit(std::move(request), std::move(counting));
  if (!status.ok()) balancer_.Release(replica, prompt_tokens);
  return status;
}

void DpEngine::Abort(std::string_view rid, AbortMatch match) {
  for (auto& replica : replicas_) replica->Abort(rid, match);
}

namespace {

// Calls `done` with the first failure of `count` answers (Ok if none), once all have arrived.
std::function<void(Status)> JoinStatuses(size_t count, std::function<void(Status)> done) {
  struct Join {
    std::mutex mu;
    size_t remaining;
    Status first = Status::Ok();
    std::function<void(Status)> done;
  };
  auto join = std::make_shared<Join>();
  join->remaining = count;
  join->done = std::move(done);
  return [join](Status status) {
    Status answer;
    {
      std::lock_guard<std::mutex> lock(join->mu);
      if (!status.ok() && join->first.ok()) join->first = std::move(status);
      if (--join->remaining != 0) return;
      answer = join->first;
    }
    join->done(std::move(answer));
  };
}

}  // namespace

void DpEngine::FlushCacheAsync(std::function<void(Status)> done) {
  // Every replica flushes; the first failure (if any) is the answer, given once all are done.
  auto joined = JoinStatuses(replicas_.size(), std::move(done));
  for (auto& replica : replicas_) replica->FlushCacheAsync(joined);
}

void DpEngine::ClearStorageAsync(std::function<void(Status)> done) {
  auto joined = JoinStatuses(replicas_.size(), std::move(done));
  for (auto& replica : replicas_) replica->ClearStorageAsync(joined);
}

void DpEngine::PauseAsync(PauseMode mode, std::function<void()> done) {
  auto joined = JoinStatuses(replicas_.size(), [done = std::move(done)](Status) { done(); });
  for (auto& replica : replicas_) {
    replica->PauseAsync(mode, [joined] { joined(Status::Ok()); });
  }
}

void DpEngine::UpdateModelAsync(std::shared_ptr<const model::CausalLM> model, bool flush_cache,
                                UpdateModelDone done) {
  // Every replica swaps when its own running requests are done; the call answers after the last,
  // with the first error and the total of held requests.
  auto held = std::make_shared<std::atomic<int64_t>>(0);
  auto joined = JoinStatuses(replicas_.size(), [done = std::move(done), held](Status status) {
    done(std::move(status), held->load());
  });
  for (auto& replica : replicas_) {
    replica->UpdateModelAsync(model, flush_cache, [joined, held](Status status, int64_t n) {
      held->fetch_add(n);
      joined(std::move(status));
    });
  }
}

void DpEngine::Continue() {
  for (auto& replica : replicas_) replica->Continue();
}

// A replica that refuses (busy) leaves the others released: releasing again once idle completes
// the release (it is idempotent per region), as a resume does for the released ones.
void DpEngine::ReleaseMemoryAsync(MemoryRegions regions, std::function<void(Status)> done) {
  auto joined = JoinStatuses(replicas_.size(), std::move(done));
  for (auto& replica : replicas_) replica->ReleaseMemoryAsync(regions, joined);
}

void DpEngine::ResumeMemoryAsync(MemoryRegions regions,
                                 std::shared_ptr<const model::CausalLM> model,
                                 std::function<void(Status)> done) {
  auto joined = JoinStatuses(replicas_.size(), std::move(done));
  for (auto& replica : replicas_) replica->ResumeMemoryAsync(regions, model, joined);
}

void DpEngine::StartProfileAsync(ProfileOptions options, TraceSink sink,
                                 std::function<void(Status)> started) {
  auto joined = JoinStatuses(replicas_.size(), std::move(started));
  for (auto& replica : replicas_) replica->StartProfileAsync(options, sink, joined);
}

void DpEngine::StopProfileAsync(std::function<void(Status)> stopped) {
  auto joined = JoinStatuses(replicas_.size(), std::move(stopped));
  for (auto& replica : replicas_) replica->StopProfileAsync(joined);
}

void DpEngine::ExpertRecordAsync(ExpertRecordAction action, ExpertRecordDone done) {
  // Every replica's answer, in dp_rank order; the first failure is the answer.
  struct Join {
    std::mutex mu;
    size_t remaining;
    Status first = Status::Ok();
    std::vector<std::vector<ExpertDump>> dumps;
    ExpertRecordDone done;
  };
  auto join = std::make_shared<Join>();
  join->remaining = replicas_.size();
  join->dumps.resize(replicas_.size());
  join->done = std::move(done);
  for (size_t i = 0; i < replicas_.size(); ++i) {
    replicas_[i]->ExpertRecordAsync(action, [join, i](Expected<std::vector<ExpertDump>> got) {
      std::lock_guard<std::mutex> lock(join->mu);
      if (!got.ok() && join->first.ok()) join->first = got.status();
      if (got.ok()) join->dumps[i] = std::move(got).value();
      if (--join->remaining != 0) return;
      if (!join->first.ok()) return join->done(join->first);
      std::vector<ExpertDump> all;
      for (auto& dumps : join->dumps) {
        for (ExpertDump& d : dumps) all.push_back(std::move(d));
      }
      join->done(std::move(all));
    });
  }
}

EngineStats DpEngine::Stats() const {
  EngineStats total;
  double used_weighted = 0.0;
  for (const EngineStats& s : ReplicaStats()) {
    total.num_running_reqs += s.num_running_reqs;
    total.num_queued_reqs += s.num_queued_reqs;
    total.max_total_num_tokens += s.max_total_num_tokens;
    total.max_running_requests += s.max_running_requests;
    total.context_len = s.context_len;
    total.used_tokens += s.used_tokens;
    total.peak_tokens += s.peak_tokens;
    total.cached_tokens += s.cached_tokens;
    used_weighted += s.token_usage * static_cast<double>(s.max_total_num_tokens);
    total.gen_throughput += s.gen_throughput;
    total.num_retractions += s.num_retractions;
    total.storage_tier = total.storage_tier || s.storage_tier;
    total.storage.Add(s.storage);
    total.paused = total.paused || s.paused;
    total.released.kv_cache = total.released.kv_cache || s.released.kv_cache;
    total.released.weights = total.released.weights || s.released.weights;
    total.jump_forward_tokens += s.jump_forward_tokens;
    // Replicas decode separately: the gauges show the best-accepting one.
    total.spec_accept_length = std::max(total.spec_accept_length, s.spec_accept_length);
    total.spec_accept_rate = std::max(total.spec_accept_rate, s.spec_accept_rate);
    total.prompt_tokens_total += s.prompt_tokens_total;
    total.cached_prompt_tokens_total += s.cached_prompt_tokens_total;
    if (s.kv_leak_check != "ok") {
      const std::string failure = "DP" + std::to_string(s.dp_rank) + ": " + s.kv_leak_check;
      total.kv_leak_check =
          total.kv_leak_check == "ok" ? failure : total.kv_leak_check + "; " + failure;
    }
  }
  if (total.max_total_num_tokens > 0) {
    total.token_usage = used_weighted / static_cast<double>(total.max_total_num_tokens);
  }
  if (total.prompt_tokens_total > 0) {
    total.cache_hit_rate = static_cast<double>(total.cached_prompt_tokens_total) /
                           static_cast<double>(total.prompt_tokens_total);
  }
  return total;
}

std::vector<EngineStats> DpEngine::ReplicaStats() const {
  std::vector<EngineStats> out;
  for (size_t r = 0; r < replicas_.size(); ++r) {
    EngineStats s = replicas_[r]->Stats();
    s.dp_rank = static_cast<int32_t>(r);
    out.push_back(s);
  }
  return out;
}

Status DpEngine::CheckLeaks() const {
  std::string failures;
  for (size_t r = 0; r < replicas_.size(); ++r) {
    Status status = replicas_[r]->CheckLeaks();
    if (status.ok()) continue;
    if (!failures.empty()) failures += "; ";
    failures += "DP" + std::to_string(r) + ": " + status.message();
  }
  if (failures.empty()) return Status::Ok();
  return Status(StatusCode::kInternal, failures);
}

void DpEngine::Shutdown() {
  for (auto& replica : replicas_) replica->Shutdown();
}

}  // namespace radixserve::engine

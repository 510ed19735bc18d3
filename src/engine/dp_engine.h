// DpEngine: the Engine facade over --dp-size data-parallel replicas (SGLang's
// DataParallelController, in one process). Each replica is a full engine (its own engine thread,
// KV pool, prefix cache, scheduler and thread pool) sharing the read-only model weights; a
// LoadBalancer picks the replica of each new request.
//   * Submit: to the chosen replica; its rejection is the caller's answer (no retry elsewhere).
//   * Abort: broadcast (a rid prefix may match requests on every replica).
//   * FlushCache: every replica flushes; an error if any of them had pending requests (SGLang
//     broadcasts the flush and reports success only if every rank succeeded).
//   * PauseAsync / Continue: every replica; the pause is done when all of them are paused.
//   * Release/ResumeMemoryAsync: every replica; the first failure is the answer.
//   * Start/StopProfileAsync: every replica (one trace each); the first failure is the answer.
//   * Stats: the sum over replicas; ReplicaStats: one per replica, dp_rank in order.
//   * CheckLeaks: every replica's check; the messages of failing ones, prefixed with their rank.
//
// Thread safety: as Engine. The replicas' thread pools are owned here and outlive them.
#pragma once

#include <memory>
#include <vector>

#include "common/thread_pool.h"
#include "engine/engine.h"
#include "engine/load_balancer.h"

namespace radixserve::engine {

class DpEngine final : public Engine {
 public:
  // `pools` may be empty when the replicas use a pool owned elsewhere.
  DpEngine(std::vector<std::unique_ptr<ThreadPool>> pools,
           std::vector<std::unique_ptr<Engine>> replicas, LoadBalanceMethod method);
  ~DpEngine() override;

  Status Submit(GenerateRequest request, EventSink sink) override;
  void Abort(std::string_view rid, AbortMatch match) override;
  void FlushCacheAsync(std::function<void(Status)> done) override;
  void ClearStorageAsync(std::function<void(Status)> done) override;
  void PauseAsync(PauseMode mode, std::function<void()> done) override;
  void UpdateModelAsync(std::shared_ptr<const model::CausalLM> model, bool flush_cache,
                        UpdateModelDone done) override;
  void Continue() override;
  void ReleaseMemoryAsync(MemoryRegions regions, std::function<void(Status)> done) override;
  void ResumeMemoryAsync(MemoryRegions regions, std::shared_ptr<const model::CausalLM> model,
                         std::function<void(Status)> done) override;
  void StartProfileAsync(ProfileOptions options, TraceSink sink,
                         std::function<void(Status)> started) override;
  void StopProfileAsync(std::function<void(Status)> stopped) override;
  void ExpertRecordAsync(ExpertRecordAction action, ExpertRecordDone done) override;
  EngineStats Stats() const override;
  std::vector<EngineStats> ReplicaStats() const override;
  Status CheckLeaks() const override;
  // The replicas' pools are alike: the first one's.
  std::optional<kv::KvRowsLayout> KvLayout() const override { return replicas_[0]->KvLayout(); }
  void Shutdown() override;

  const LoadBalancer& balancer() const { return balancer_; }

 private:
  std::vector<std::unique_ptr<ThreadPool>> pools_;  // destroyed after the replicas
  std::vector<std::unique_ptr<Engine>> replicas_;
  LoadBalancer balancer_;
};

}  // namespace radixserve::engine

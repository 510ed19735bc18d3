// Tensor-parallel serving: rank 0 (the leader) runs the server, scheduler and sampling as with one
// process; its CausalLM is a TensorParallelLeader, which sends every step to the other ranks
// before running its own shard. The other ranks (followers) run RunTensorParallelFollower: they
// hold only their shard and a KV pool of the leader's slot count, and run each step they are sent.
// Step plans stay the leader's: slot indices come with each step, so the radix cache, chunked
// prefill, retraction and speculative verification need nothing from the followers.
//
// A step goes out as two broadcasts (TpGroup): a fixed header (kind, payload size, the leader's
// KV slot count and dtype) and the payload (token ids, positions, each sequence's prefix and
// extend lengths and KV slots). While idle the leader sends a keep-alive header every 2 s (a
// quarter of the group's timeout when shorter): a follower waiting for work tells a silent
// leader from a hung one, and an idle leader notices a follower gone.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "common/thread_pool.h"
#include "dist/tp_group.h"
#include "model/causal_lm.h"

namespace radixserve::dist {

class TensorParallelLeader final : public model::CausalLM {
 public:
  // `shard` is rank 0's shard (loaded with the group as its TensorShard); `group` outlives this.
  TensorParallelLeader(std::shared_ptr<const model::CausalLM> shard, TpGroup* group);
  // Tells the followers to exit (status 0).
  ~TensorParallelLeader() override;

  const model::ModelConfig& config() const override { return shard_->config(); }
  int64_t weight_bytes() const override { return shard_->weight_bytes(); }
  Status Forward(const model::ForwardBatch& batch, const model::KvCacheView& kv, ThreadPool* pool,
                 float* logits) const override;
  Status ForwardWithHidden(const model::ForwardBatch& batch, const model::KvCacheView& kv,
                           ThreadPool* pool, float* logits, float* hidden) const override;
  Expected<WeightRows> ReadWeight(const std::string& hf_name, int64_t max_rows) const override {
    return shard_->ReadWeight(hf_name, max_rows);
  }
  Expected<std::shared_ptr<const model::LoraAdapter>> LoadLora(
      const std::string& path, model::LoraLoadOptions options) const override {
    return shard_->LoadLora(path, std::move(options));
  }

 private:
  // Sends `batch` to the followers; the caller holds mu_.
  void SendStep(const model::ForwardBatch& batch, const model::KvCacheView& kv) const;
  void KeepAlive();

  std::shared_ptr<const model::CausalLM> shard_;
  TpGroup* group_;
  mutable std::mutex mu_;  // one collective sequence at a time: a step or a keep-alive
  mutable std::chrono::steady_clock::time_point last_sent_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread keep_alive_;
};

// Runs the leader's steps on `shard` until it says stop (returns 0). A failed collective ends the
// process inside TpGroup; a step the shard refuses (the leader's shard refuses it the same way)
// is skipped.
int RunTensorParallelFollower(const model::CausalLM& shard, TpGroup& group, ThreadPool* pool);

}  // namespace radixserve::dist

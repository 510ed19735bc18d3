// Tensor-parallel serving: rank 0 (the leader) runs the server, scheduler and sampling as with one
// process; its CausalLM is a TensorParallelLeader, which sends every step to the other ranks
// before running its own shard. The other ranks (followers) run RunTensorParallelFollower: they
// hold only their shard and a KV pool of the leader's slot count, and run each step they are sent.
// Step plans stay the leader's: slot indices come with each step, so the radix cache, chunked
// prefill, retraction and speculative verification need nothing from the followers.
//
// A step goes out as two broadcasts (TpGroup): a fixed header (kind, payload size, the leader's
// KV slot count and dtype) and the payload (token ids, positions, each sequence's prefix and
// extend lengths and KV slots). Slot lists travel as changes: the followers keep every running
// sequence's list under an id the leader assigns (SlotTables), and a step carries per sequence its
// id, how many slots of the kept list still hold, and the slots after those, so a decode step
// sends one slot per sequence rather than its whole context. While idle the leader sends a
// keep-alive header every 2 s (a quarter of the group's timeout when shorter): a follower waiting
// for work tells a silent leader from a hung one, and an idle leader notices a follower gone.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/thread_pool.h"
#include "dist/tp_group.h"
#include "model/causal_lm.h"

namespace radixserve::dist {

// The slot lists the followers hold, as the leader tracks them: one per sequence seen recently,
// keyed by where the sequence's list lives on the leader (a row of the request-to-token table,
// stable while the request runs; whatever it holds is compared, never assumed).
class SlotTables {
 public:
  struct Change {
    int32_t id;
    int64_t keep;  // leading slots of the held list that still hold
  };
  // Past `capacity` lists an id is reused (the least recently used one), unless a step holds more
  // sequences than that: then the tables grow.
  explicit SlotTables(size_t capacity = 4096) : capacity_(capacity) {}
  // The change that brings list `id` to `slots`, recording it; `step` tells the sequences of one
  // step apart (none of them loses its id to another).
  Change Update(std::span<const int32_t> slots, uint64_t step);
  // Every kSweepSteps steps (before the step's updates), the lists no step used for that long
  // are dropped, here and, by the same rule, on the followers (FollowerSlotTables): finished
  // requests' lists do not stay.
  static constexpr uint64_t kSweepSteps = 64;
  void Sweep(uint64_t step);

 private:
  size_t capacity_;
  std::unordered_map<const int32_t*, int32_t> id_of_;
  std::vector<std::vector<int32_t>> lists_;  // by id
  std::vector<const int32_t*> owner_;        // by id
  std::vector<uint64_t> used_;               // by id: the last step that used it
};

// The followers' side of SlotTables.
class FollowerSlotTables {
 public:
  // List `id` after keeping its first `keep` slots and appending `added`.
  std::span<const int32_t> Apply(size_t id, size_t keep, std::span<const int32_t> added,
                                 uint64_t step);
  void Sweep(uint64_t step);

 private:
  std::vector<std::vector<int32_t>> lists_;  // by id
  std::vector<uint64_t> used_;
};

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
  mutable SlotTables tables_;             // guarded by mu_
  mutable uint64_t steps_ = 0;            // guarded by mu_
  mutable std::vector<uint8_t> payload_;  // guarded by mu_
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread keep_alive_;
};

// Runs the leader's steps on `shard` until it says stop (returns 0). A failed collective ends the
// process inside TpGroup; a step the shard refuses (the leader's shard refuses it the same way)
// is skipped.
int RunTensorParallelFollower(const model::CausalLM& shard, TpGroup& group, ThreadPool* pool);

}  // namespace radixserve::dist

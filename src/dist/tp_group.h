// TpGroup: ranks of one model split over processes as a gloo context (Facebook's collective
// library, PyTorch's CPU backend; DESIGN.md says why gloo). Connects through a rendezvous store
// (tcp_store.h), then gives the model its all-reduce (model::AllReducer), the leader the
// broadcasts that carry each step to the other ranks, and pipeline stages their point-to-point
// sends (GroupStageLink). Every rank of the model is in one group (the world: broadcasts and
// pipeline sends); with both --tp-size and --pp-size above 1 each stage's tensor-parallel ranks
// form a group of their own as well (its all-reduce).
//
// Every collective runs with the group's timeout (--dist-timeout). A collective that fails (a
// rank exited, a connection broke, the timeout passed) ends this process: the rank logs one
// error line naming the operation and the cause and exits with status 1, which closes its
// connections, so the other ranks fail the same way at their next collective.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>

#include "common/status.h"
#include "dist/shm_reducer.h"
#include "model/tensor_shard.h"

namespace radixserve::dist {

struct TpGroupOptions {
  int rank = 0;
  int size = 1;
  // The address this rank's gloo pairs listen at (reachable by every other rank).
  std::string local_address = "127.0.0.1";
  std::chrono::milliseconds timeout{std::chrono::seconds(600)};
  // Every rank runs on this machine: all-reduce through shared memory (shm_reducer.h) rather
  // than sockets. Ignored (with one warning) when any rank cannot map the segment.
  bool shared_memory = false;
  // Otherwise, with several machines of this many ranks each (ranks [0, n) on the first, [n, 2n)
  // on the next, ...; 1 < n < size): all-reduce in two levels, through shared memory among each
  // machine's ranks and over gloo among the machines' first ranks (SGLang's CPU backend: shared
  // memory within a node, the collective library between nodes).
  int ranks_per_node = 1;
};

class TpGroup final : public model::AllReducer {
 public:
  // Joins the group through `store` (every rank sets its address and waits for the others' until
  // the timeout); Unavailable naming the cause when it cannot.
  static Expected<std::unique_ptr<TpGroup>> Connect(const TpGroupOptions& options,
                                                    gloo::rendezvous::Store& store);

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool shared_memory() const { return shm_ != nullptr; }
  bool hierarchical() const { return node_shm_ != nullptr; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  void AllReduceSum(float* data, int64_t count) override;
  // Rank 0's `bytes` bytes at `data` into every other rank's `data`.
  void Broadcast(void* data, size_t bytes);
  // The sum of every rank's `value` (a barrier that also counts ranks ready).
  int64_t Sum(int64_t value);
  // Point to point: a copy of `bytes` bytes at `data` goes to rank `to` in the background (in the
  // order of this rank's sends to it); Receive takes the next one from `from` into `data`.
  void SendAsync(int to, const void* data, size_t bytes);
  void Receive(int from, void* data, size_t bytes);
  // Returns once every SendAsync was delivered.
  void WaitSends();

 private:
  TpGroup(std::shared_ptr<gloo::rendezvous::Context> context, std::chrono::milliseconds timeout)
      : context_(std::move(context)),
        rank_(context_->rank),
        size_(context_->size),
        timeout_(timeout),
        sent_(static_cast<size_t>(size_)),
        received_(static_cast<size_t>(size_)) {}
  // A point-to-point message's slot: the n-th from `from` to `to`, the same on both sides.
  static uint64_t PointToPointSlot(int from, int to, uint64_t n);
  [[noreturn]] void Fail(const char* operation, const std::exception& error) const;
  // All-reduce by one exchange: every rank sends its buffer to every other and adds all of them
  // up in rank order. One round trip instead of the ring's 2 (N - 1) steps: what decode steps'
  // small buffers need; larger ones with more than 2 ranks take gloo's ring (less traffic).
  void ExchangeAndSum(float* data, int64_t count);
  static constexpr size_t kDirectBytes = 256 << 10;
  // gloo's ring all-reduce (sum) of `count` values; `operation` names it if it fails.
  template <typename T>
  void RingSum(T* data, size_t count, const char* operation);

  std::shared_ptr<gloo::rendezvous::Context> context_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<ShmReducer> shm_;  // null: all-reduce over gloo
  // Two-level all-reduce (TpGroupOptions::ranks_per_node): this machine's ranks, and (on each
  // machine's first rank) the group of those first ranks.
  std::unique_ptr<ShmReducer> node_shm_;
  std::unique_ptr<TpGroup> node_leaders_;
  uint64_t exchanges_ = 0;
  std::vector<float> theirs_;  // every rank's part, [size, count]
  struct PendingSend {
    std::vector<uint8_t> bytes;
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  };
  std::vector<PendingSend> sends_;
  std::vector<uint64_t> sent_, received_;  // per peer: point-to-point messages so far
};

// A pipeline stage's link (model::StageLink) over the world group: stage s's peer of this rank
// is world rank s * tp_size + tp_rank.
class GroupStageLink final : public model::StageLink {
 public:
  GroupStageLink(TpGroup* world, int tp_size, int tp_rank)
      : world_(world), tp_size_(tp_size), tp_rank_(tp_rank) {}
  void SendTo(int stage, const float* data, int64_t count) override {
    world_->SendAsync(Peer(stage), data, static_cast<size_t>(count) * sizeof(float));
  }
  void ReceiveFrom(int stage, float* data, int64_t count) override {
    world_->Receive(Peer(stage), data, static_cast<size_t>(count) * sizeof(float));
  }
  void Flush() override { world_->WaitSends(); }

 private:
  int Peer(int stage) const { return stage * tp_size_ + tp_rank_; }
  TpGroup* world_;
  int tp_size_;
  int tp_rank_;
};

}  // namespace radixserve::dist

// TpGroup: the ranks of one tensor-parallel model as a gloo context (Facebook's collective
// library, PyTorch's CPU backend; DESIGN.md says why gloo). Connects through a rendezvous store
// (tcp_store.h), then gives the model its all-reduce (model::AllReducer) and the leader the
// broadcasts that carry each step to the other ranks.
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
  std::chrono::milliseconds timeout() const { return timeout_; }

  void AllReduceSum(float* data, int64_t count) override;
  // Rank 0's `bytes` bytes at `data` into every other rank's `data`.
  void Broadcast(void* data, size_t bytes);
  // The sum of every rank's `value` (a barrier that also counts ranks ready).
  int64_t Sum(int64_t value);

 private:
  TpGroup(std::shared_ptr<gloo::rendezvous::Context> context, std::chrono::milliseconds timeout)
      : context_(std::move(context)),
        rank_(context_->rank),
        size_(context_->size),
        timeout_(timeout) {}
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
  uint64_t exchanges_ = 0;
  std::vector<float> theirs_;  // every rank's part, [size, count]
};

}  // namespace radixserve::dist

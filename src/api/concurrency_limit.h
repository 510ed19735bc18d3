// ConcurrencyLimit: RTP-LLM's --concurrency-limit. At most `limit` generation calls are in flight
// at once (queued in the engine or running); a call beyond it is refused at once with RTP-LLM's
// CONCURRENCY_LIMIT_ERROR (503), or, with --concurrency-with-block, waits in arrival order for a
// call to end. Waiting holds no thread: the call's start runs on the thread that frees the slot.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace radixserve::api {

class ConcurrencyLimit {
 public:
  // One admitted call's slot: freed by Release or on destruction, once.
  class Slot {
   public:
    explicit Slot(ConcurrencyLimit& limit) : limit_(limit) {}
    ~Slot() { Release(); }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    void Release();

   private:
    ConcurrencyLimit& limit_;
    std::once_flag released_;
  };
  using Start = std::function<void(std::shared_ptr<Slot>)>;

  ConcurrencyLimit(int64_t limit, bool block) : limit_(limit), block_(block) {}

  // Runs `start` with the call's slot now if one is free, later (in order) if the limit blocks,
  // and returns false without running it otherwise.
  bool Enter(Start start);

  int64_t limit() const { return limit_; }
  bool blocks() const { return block_; }

 private:
  void Free();

  const int64_t limit_;
  const bool block_;
  mutable std::mutex mu_;
  int64_t in_flight_ = 0;
  std::deque<Start> waiting_;
};

}  // namespace radixserve::api

// ThreadPool: a fixed set of worker threads that split loops into contiguous ranges.
//
// Contract: ParallelFor may be called from one thread at a time (the engine thread that owns the
// pool); it blocks until every range has run. The calling thread runs ranges too, so a pool of
// size 1 has no worker threads and runs everything inline. Work functions must not throw and
// must not call ParallelFor on the same pool (no nesting).
//
// A model step issues hundreds of short loops (a few microseconds each at decode), so hand-off
// cost matters more than anything else here: after a loop, workers spin on an atomic generation
// counter for a short while (kSpinMicros) before sleeping on it, and the caller spins the same
// way for the workers to finish. Sleeping threads are woken through the futex behind
// std::atomic::wait/notify, and only when someone sleeps.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace radixserve {

class ThreadPool {
 public:
  // threads <= 0 means all cores the process may use (sched_getaffinity).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n); ranges hold at least `grain`
  // items (except the last). Returns when all calls have finished.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Calls fn(index, count) once on each of the pool's `count` = size() threads (index 0 is the
  // caller), for work that partitions itself. Returns when all calls have finished.
  void RunOnAll(const std::function<void(int, int)>& fn);

  // Cores this process may use (at least 1).
  static int AvailableCores();

  // How long an idle thread spins before it sleeps.
  static constexpr int64_t kSpinMicros = 1000;

 private:
  struct Job {
    const std::function<void(int64_t, int64_t)>* ranges = nullptr;
    const std::function<void(int, int)>* per_thread = nullptr;
    int64_t n = 0;
    int64_t chunk = 1;
  };

  void WorkerLoop(int index);
  void RunJob(int index);
  void Dispatch();

  std::vector<std::thread> workers_;
  Job job_;  // written by the caller before a generation bump, read by workers after it
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<int> pending_{0};   // workers still inside the current generation
  std::atomic<int> sleepers_{0};  // workers blocked on generation_
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stopping_{false};
};

}  // namespace radixserve

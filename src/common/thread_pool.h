// ThreadPool: a fixed set of worker threads that split loops into contiguous ranges.
//
// Contract: ParallelFor may be called from one thread at a time (the engine thread that owns the
// pool); it blocks until every range has run. The calling thread runs ranges too, so a pool of
// size 1 has no worker threads and runs everything inline. Work functions must not throw and
// must not call ParallelFor on the same pool (no nesting).
//
// A model step issues hundreds of short loops (a few microseconds each at decode), so hand-off
// cost matters more than anything else here: after a loop, workers spin on an atomic generation
// counter for a short while (kSpinMicros) before sleeping on it (futex behind std::atomic::wait,
// woken only when someone sleeps). Ranges are claimed from one atomic word holding a job tag and
// the next index, so the caller never waits for a worker that has not started: when the cores
// are busy with other processes, the caller simply runs the ranges itself.
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

  // Calls fn(index, count) once for each index in [0, count), count = size(), for work that
  // partitions itself into one part per thread. Normally each call runs on its own thread, but
  // a part no worker has picked up when the caller is done is run by the caller. Returns when
  // all calls have finished.
  void RunOnAll(const std::function<void(int, int)>& fn);

  // Cores this process may use (at least 1).
  static int AvailableCores();

  // How long an idle thread spins before it sleeps.
  static constexpr int64_t kSpinMicros = 1000;

 private:
  void WorkerLoop();
  // Claims and runs ranges of the current job until none is left.
  void RunRanges();
  void Run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn);

  std::vector<std::thread> workers_;
  // The current job. Written by the caller only while state_ holds an invalid index, so a
  // worker that loaded them and then claims a range with a compare-exchange on state_ knows
  // they belong to the job whose tag it saw.
  std::atomic<const std::function<void(int64_t, int64_t)>*> job_fn_{nullptr};
  std::atomic<int64_t> job_n_{0};
  std::atomic<int64_t> job_chunk_{1};
  std::atomic<uint64_t> state_;          // job tag (high bits) | next index (low bits)
  std::atomic<int64_t> unfinished_{0};   // items of the current job not yet done
  std::atomic<uint64_t> generation_{0};  // bumped to wake workers
  std::atomic<int> sleepers_{0};         // workers blocked on generation_
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stopping_{false};
  uint64_t tag_ = 0;
};

}  // namespace radixserve

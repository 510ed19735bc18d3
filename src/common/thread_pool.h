// ThreadPool: a fixed set of worker threads that split loops into contiguous ranges.
//
// Contract: ParallelFor may be called from one thread at a time (the engine thread that owns the
// pool); it blocks until every range has run. The calling thread runs ranges too, so a pool of
// size 1 has no worker threads and runs everything inline. Work functions must not throw and
// must not call ParallelFor on the same pool (no nesting).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
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

  // Cores this process may run on (at least 1).
  static int AvailableCores();

 private:
  void WorkerLoop();
  void RunChunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  int busy_ = 0;
  // Current job (valid while busy_ > 0 or the caller is inside ParallelFor).
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 1;
  int64_t next_chunk_ = 0;
};

}  // namespace radixserve

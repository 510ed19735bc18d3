#include "common/thread_pool.h"

#include <sched.h>

#include <algorithm>

namespace radixserve {

int ThreadPool::AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = AvailableCores();
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::RunChunks() {
  while (true) {
    int64_t begin;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      begin = next_chunk_;
      if (begin >= job_n_) return;
      next_chunk_ = std::min(job_n_, begin + job_chunk_);
    }
    (*job_)(begin, std::min(job_n_, begin + job_chunk_));
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      ++busy_;
    }
    RunChunks();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --busy_;
    }
    done_.notify_all();
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t parts = size();
  if (parts == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // A few chunks per thread balance uneven cores without much locking.
  int64_t chunk = std::max(grain, (n + parts * 4 - 1) / (parts * 4));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    next_chunk_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  RunChunks();
  std::unique_lock<std::mutex> lock(mutex_);
  // Workers that woke for this generation finish their chunks; late wakers find none left.
  done_.wait(lock, [&] { return busy_ == 0 && next_chunk_ >= job_n_; });
  job_ = nullptr;
}

}  // namespace radixserve

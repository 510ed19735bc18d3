#include "common/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

namespace radixserve {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until done() holds or kSpinMicros pass; true if done() held.
template <typename Done>
bool SpinUntil(Done done) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 1;; ++i) {
    if (done()) return true;
    CpuRelax();
    if ((i & 255) == 0) {
      auto spent = std::chrono::steady_clock::now() - start;
      if (spent > std::chrono::microseconds(ThreadPool::kSpinMicros)) return done();
    }
  }
}

}  // namespace

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
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::RunJob(int index) {
  if (job_.per_thread != nullptr) {
    (*job_.per_thread)(index, size());
    return;
  }
  while (true) {
    const int64_t begin = next_chunk_.fetch_add(job_.chunk, std::memory_order_relaxed);
    if (begin >= job_.n) return;
    (*job_.ranges)(begin, std::min(job_.n, begin + job_.chunk));
  }
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    auto changed = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!SpinUntil(changed)) {
      sleepers_.fetch_add(1);
      // wait() returns at once if the generation moved after the check above.
      while (generation_.load() == seen) generation_.wait(seen);
      sleepers_.fetch_sub(1);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load()) return;
    RunJob(index);
    if (pending_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
      pending_.notify_one();
    }
  }
}

void ThreadPool::Dispatch() {
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1);  // seq_cst: publishes job_ and orders against sleepers_ below
  if (sleepers_.load() > 0) generation_.notify_all();
  RunJob(0);
  auto finished = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!SpinUntil(finished)) {
    caller_sleeping_.store(true);
    for (int left = pending_.load(); left != 0; left = pending_.load()) pending_.wait(left);
    caller_sleeping_.store(false);
  }
  job_ = Job{};
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
  // A few chunks per thread balance a core that is busy with something else.
  job_ = Job{.ranges = &fn, .per_thread = nullptr, .n = n,
             .chunk = std::max(grain, (n + parts * 4 - 1) / (parts * 4))};
  next_chunk_.store(0, std::memory_order_relaxed);
  Dispatch();
}

void ThreadPool::RunOnAll(const std::function<void(int, int)>& fn) {
  if (workers_.empty()) {
    fn(0, 1);
    return;
  }
  job_ = Job{.ranges = nullptr, .per_thread = &fn, .n = 0, .chunk = 1};
  Dispatch();
}

}  // namespace radixserve

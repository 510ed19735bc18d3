#include "common/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

namespace radixserve {
namespace {

constexpr int kIndexBits = 40;
constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
// An index no job reaches: marks state_ while the caller rewrites the job fields.
constexpr uint64_t kInvalidIndex = kIndexMask;

uint64_t Pack(uint64_t tag, uint64_t index) { return (tag << kIndexBits) | index; }
uint64_t IndexOf(uint64_t state) { return state & kIndexMask; }

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

ThreadPool::ThreadPool(int threads) : state_(Pack(0, kInvalidIndex)) {
  if (threads <= 0) threads = AvailableCores();
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::RunRanges() {
  while (true) {
    uint64_t state = state_.load(std::memory_order_acquire);
    const uint64_t index = IndexOf(state);
    if (index == kInvalidIndex) return;  // between jobs
    const int64_t n = job_n_.load(std::memory_order_relaxed);
    const int64_t chunk = job_chunk_.load(std::memory_order_relaxed);
    const auto* fn = job_fn_.load(std::memory_order_relaxed);
    const auto begin = static_cast<int64_t>(index);
    if (begin >= n) return;
    const int64_t end = std::min(n, begin + chunk);
    // Succeeds only if no other thread took this range and the job is still the one whose
    // fields were read above (a new job changes the tag).
    if (!state_.compare_exchange_weak(state, state + static_cast<uint64_t>(end - begin),
                                      std::memory_order_acq_rel)) {
      continue;
    }
    (*fn)(begin, end);
    if (unfinished_.fetch_sub(end - begin) == end - begin && caller_sleeping_.load()) {
      unfinished_.notify_one();
    }
  }
}

void ThreadPool::WorkerLoop() {
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
    RunRanges();
  }
}

void ThreadPool::Run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
  tag_ = (tag_ + 1) & ((uint64_t{1} << (64 - kIndexBits)) - 1);
  state_.store(Pack(tag_, kInvalidIndex));
  job_fn_.store(&fn, std::memory_order_relaxed);
  job_n_.store(n, std::memory_order_relaxed);
  job_chunk_.store(chunk, std::memory_order_relaxed);
  unfinished_.store(n, std::memory_order_relaxed);
  state_.store(Pack(tag_, 0));  // seq_cst: publishes the fields above
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) generation_.notify_all();
  RunRanges();
  auto finished = [&] { return unfinished_.load(std::memory_order_acquire) == 0; };
  if (!SpinUntil(finished)) {
    caller_sleeping_.store(true);
    for (int64_t left = unfinished_.load(); left != 0; left = unfinished_.load()) {
      unfinished_.wait(left);
    }
    caller_sleeping_.store(false);
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
  // A few chunks per thread balance a core that is busy with something else.
  Run(n, std::max(grain, (n + parts * 4 - 1) / (parts * 4)), fn);
}

void ThreadPool::RunOnAll(const std::function<void(int, int)>& fn) {
  const int count = size();
  if (count == 1) {
    fn(0, 1);
    return;
  }
  const std::function<void(int64_t, int64_t)> each = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) fn(static_cast<int>(i), count);
  };
  Run(count, 1, each);
}

}  // namespace radixserve

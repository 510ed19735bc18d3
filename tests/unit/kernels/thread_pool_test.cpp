// ThreadPool (src/common) is tested here because the kernels are its first user: every index is
// visited exactly once, ranges respect the grain, and the pool can be reused many times.
#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace radixserve {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.ParallelFor(n, 3, [&](int64_t begin, int64_t end) {
        EXPECT_LT(begin, end);
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPoolTest, ReusedManyTimes) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int round = 0; round < 500; ++round) {
    pool.ParallelFor(64, 1, [&](int64_t begin, int64_t end) { total += end - begin; });
  }
  EXPECT_EQ(total.load(), 500 * 64);
}

TEST(ThreadPoolTest, RunOnAllCallsEachThreadOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int round = 0; round < 50; ++round) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(threads));
      pool.RunOnAll([&](int index, int count) {
        EXPECT_EQ(count, threads);
        hits[static_cast<size_t>(index)]++;
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPoolTest, WorkersSleepAndWakeAgain) {
  // Longer than the spin window, so the workers go to sleep between the two loops.
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  pool.ParallelFor(100, 1, [&](int64_t begin, int64_t end) { total += end - begin; });
  std::this_thread::sleep_for(std::chrono::microseconds(3 * ThreadPool::kSpinMicros));
  pool.ParallelFor(100, 1, [&](int64_t begin, int64_t end) { total += end - begin; });
  EXPECT_EQ(total.load(), 200);
}

TEST(ThreadPoolTest, DefaultUsesAvailableCores) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.size(), ThreadPool::AvailableCores());
  EXPECT_GE(ThreadPool::AvailableCores(), 1);
}

}  // namespace
}  // namespace radixserve

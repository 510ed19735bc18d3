#include "common/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace radixserve {
namespace {

TEST(WorkQueueTest, RunsTasksOffTheCallerInPostingOrder) {
  std::vector<int> order;
  std::thread::id worker;
  {
    WorkQueue queue(1, "test-queue");
    for (int i = 0; i < 100; ++i) {
      queue.Post([&order, &worker, i] {
        worker = std::this_thread::get_id();
        order.push_back(i);
      });
    }
  }  // the destructor runs what was posted
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_NE(worker, std::this_thread::get_id());
}

TEST(WorkQueueTest, PendingCountsQueuedAndRunningTasks) {
  WorkQueue queue(1, "test-queue");
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  queue.Post([&started, released] {
    started.set_value();
    released.wait();
  });
  queue.Post([] {});
  started.get_future().wait();
  EXPECT_EQ(queue.pending(), 2);
  release.set_value();
  std::promise<void> last;
  queue.Post([&last] { last.set_value(); });
  last.get_future().wait();
  // The counter drops just after the task returns.
  while (queue.pending() != 0) std::this_thread::yield();
  EXPECT_EQ(queue.pending(), 0);
}

TEST(WorkQueueTest, ManyThreadsPostConcurrently) {
  std::atomic<int> ran{0};
  {
    WorkQueue queue(2, "test-queue");
    std::vector<std::thread> posters;
    for (int t = 0; t < 4; ++t) {
      posters.emplace_back([&queue, &ran] {
        for (int i = 0; i < 1000; ++i) queue.Post([&ran] { ran.fetch_add(1); });
      });
    }
    for (auto& poster : posters) poster.join();
  }
  EXPECT_EQ(ran.load(), 4000);
}

}  // namespace
}  // namespace radixserve

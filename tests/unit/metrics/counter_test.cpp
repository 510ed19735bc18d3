#include "metrics/counter.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "metrics/gauge.h"

namespace radixserve::metrics {
namespace {

TEST(CounterTest, StartsAtZeroAndAdds) {
  Counter c;
  EXPECT_EQ(c.Value(), 0.0);
  c.Inc();
  c.Inc(2.5);
  EXPECT_EQ(c.Value(), 3.5);
}

TEST(CounterDeathTest, NegativeIncrementIsABug) {
  Counter c;
  EXPECT_DEATH(c.Inc(-1), "counters only go up");
}

TEST(CounterTest, ConcurrentIncrementsSumExactly) {
  Counter c;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&c] {
      for (int i = 0; i < kPerThread; ++i) c.Inc(3);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(c.Value(), 3.0 * kThreads * kPerThread);
}

TEST(GaugeTest, SetIncDec) {
  Gauge g;
  g.Set(10);
  g.Inc(2);
  g.Dec(5);
  g.Dec();
  EXPECT_EQ(g.Value(), 6.0);
  g.Set(-0.25);
  EXPECT_EQ(g.Value(), -0.25);
}

TEST(GaugeTest, ConcurrentIncDecBalances) {
  Gauge g;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&g, t] {
      for (int i = 0; i < 50000; ++i) {
        if (t % 2 == 0) {
          g.Inc();
        } else {
          g.Dec();
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(g.Value(), 0.0);
}

}  // namespace
}  // namespace radixserve::metrics

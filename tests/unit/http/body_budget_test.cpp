#include "http/body_budget.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <limits>
#include <thread>
#include <vector>

namespace radixserve::http {
namespace {

TEST(BodyBudgetTest, TakesUpToTheLimitAndNoMore) {
  BodyBudget budget(100);
  EXPECT_TRUE(budget.TryTake(60));
  EXPECT_FALSE(budget.TryTake(41));
  EXPECT_EQ(budget.in_use(), 60u);
  EXPECT_TRUE(budget.TryTake(40));
  EXPECT_FALSE(budget.TryTake(1));
  budget.Give(100);
  EXPECT_EQ(budget.in_use(), 0u);
  // A request larger than the whole budget never overflows the arithmetic.
  EXPECT_FALSE(budget.TryTake(std::numeric_limits<std::size_t>::max()));
  EXPECT_EQ(budget.in_use(), 0u);
}

TEST(BodyBudgetTest, ReservationGrowsAndGivesEverythingBack) {
  BodyBudget budget(100);
  {
    BodyReservation a(budget);
    EXPECT_TRUE(a.GrowTo(30));
    EXPECT_TRUE(a.GrowTo(10));  // never shrinks below what is held
    EXPECT_EQ(a.bytes(), 30u);
    EXPECT_TRUE(a.GrowTo(70));
    BodyReservation b(budget);
    EXPECT_FALSE(b.GrowTo(31));
    EXPECT_EQ(b.bytes(), 0u);
    EXPECT_TRUE(b.GrowTo(30));
    a.Reset();
    EXPECT_EQ(budget.in_use(), 30u);
  }
  EXPECT_EQ(budget.in_use(), 0u);
}

TEST(BodyBudgetTest, ConcurrentTakersNeverExceedTheLimit) {
  BodyBudget budget(1000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&budget] {
      for (int i = 0; i < 20000; ++i) {
        BodyReservation r(budget);
        if (r.GrowTo(300)) {
          EXPECT_LE(budget.in_use(), budget.limit());
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(budget.in_use(), 0u);
}

}  // namespace
}  // namespace radixserve::http

#include "metrics/histogram.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace radixserve::metrics {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(HistogramTest, LessOrEqualBuckets) {
  Histogram h({1, 2, 5});
  for (double v : {0.5, 1.0, 1.5, 2.0, 4.0, 5.0, 7.0, -3.0}) h.Observe(v);
  HistogramSnapshot s = h.Snapshot();
  ASSERT_EQ(s.upper_bounds, (std::vector<double>{1, 2, 5, kInf}));
  // le=1: 0.5, 1.0, -3; le=2: +1.5, 2.0; le=5: +4, 5; +Inf: +7
  EXPECT_EQ(s.cumulative_counts, (std::vector<uint64_t>{3, 5, 7, 8}));
  EXPECT_EQ(s.count, 8u);
  EXPECT_DOUBLE_EQ(s.sum, 0.5 + 1 + 1.5 + 2 + 4 + 5 + 7 - 3);
}

TEST(HistogramTest, ExplicitInfIsNotDuplicated) {
  Histogram h({1, kInf});
  EXPECT_EQ(h.upper_bounds(), (std::vector<double>{1, kInf}));
}

TEST(HistogramTest, NanCountsInInf) {
  Histogram h({1});
  h.Observe(std::nan(""));
  HistogramSnapshot s = h.Snapshot();
  EXPECT_EQ(s.cumulative_counts, (std::vector<uint64_t>{0, 1}));
}

TEST(HistogramTest, ObserveManyCountsNInOneBucket) {
  Histogram h({0.01, 0.1, 1});
  // 5 tokens in 0.2 s: five observations of 0.04, sum grows by 0.2.
  h.ObserveMany(0.2 / 5, 5, 0.2);
  h.ObserveMany(0.5, 0, 3.0);  // n == 0 records nothing
  HistogramSnapshot s = h.Snapshot();
  EXPECT_EQ(s.cumulative_counts, (std::vector<uint64_t>{0, 5, 5, 5}));
  EXPECT_DOUBLE_EQ(s.sum, 0.2);
}

TEST(HistogramTest, ValidateBounds) {
  EXPECT_TRUE(ValidateBucketBounds({0, 1, 2}).ok());
  EXPECT_TRUE(ValidateBucketBounds({-1, 1, kInf}).ok());
  EXPECT_FALSE(ValidateBucketBounds({}).ok());
  EXPECT_FALSE(ValidateBucketBounds({1, 1}).ok());
  EXPECT_FALSE(ValidateBucketBounds({2, 1}).ok());
  EXPECT_FALSE(ValidateBucketBounds({1, std::nan("")}).ok());
  EXPECT_FALSE(ValidateBucketBounds({kInf, 1}).ok());
  EXPECT_FALSE(ValidateBucketBounds({-kInf, 1}).ok());
}

TEST(HistogramTest, ConcurrentObserversSumExactly) {
  Histogram h({1, 10, 100});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&h, t] {
      for (int i = 0; i < kPerThread; ++i) {
        // Integers are exact in double, so the atomic sum must be exact too.
        h.Observe(static_cast<double>((i + t) % 200));
      }
    });
  }
  // A concurrent reader must always see +Inf == count and monotone cumulative counts.
  for (int k = 0; k < 200; ++k) {
    HistogramSnapshot s = h.Snapshot();
    ASSERT_EQ(s.cumulative_counts.back(), s.count);
    for (size_t i = 1; i < s.cumulative_counts.size(); ++i) {
      ASSERT_LE(s.cumulative_counts[i - 1], s.cumulative_counts[i]);
    }
  }
  for (auto& thread : threads) thread.join();
  uint64_t le1 = 0, le10 = 0, le100 = 0;
  double sum = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      const int v = (i + t) % 200;
      sum += v;
      le1 += v <= 1;
      le10 += v <= 10;
      le100 += v <= 100;
    }
  }
  HistogramSnapshot s = h.Snapshot();
  EXPECT_EQ(s.cumulative_counts,
            (std::vector<uint64_t>{le1, le10, le100, uint64_t{kThreads * kPerThread}}));
  EXPECT_EQ(s.sum, sum);
}

}  // namespace
}  // namespace radixserve::metrics

#include "metrics/bucket_rule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "metrics/sglang_buckets.h"

namespace radixserve::metrics {
namespace {

std::vector<double> Ok(const std::vector<std::string>& words,
                       const std::vector<double>& defaults = {3, 1, 2, 2}) {
  auto result = GenerateBuckets(words, defaults);
  EXPECT_TRUE(result.ok()) << result.status().message();
  return result.ok() ? *result : std::vector<double>{};
}

bool Fails(const std::vector<std::string>& words) {
  return !GenerateBuckets(words, DefaultTokensBuckets()).ok();
}

TEST(BucketRuleTest, TseExampleFromServerArgsHelp) {
  // The example in SGLang's --prompt-tokens-buckets help text.
  EXPECT_EQ(Ok({"tse", "1000", "2", "8"}),
            (std::vector<double>{984, 992, 996, 998, 1000, 1002, 1004, 1008, 1016}));
}

// The rule as the help text states it, written independently: middle, then middle +/- base^k
// for k = 1..ceil(count/2), the lower side clamped at zero, sorted without repeats.
std::vector<double> TseFormula(double middle, double base, int count) {
  std::set<double> out{middle};
  for (int k = 1; k <= static_cast<int>(std::ceil(count / 2.0)); ++k) {
    out.insert(middle + std::pow(base, k));
    out.insert(std::max(0.0, middle - std::pow(base, k)));
  }
  return {out.begin(), out.end()};
}

TEST(BucketRuleTest, TseMatchesFormula) {
  for (double middle : {1.0, 50.0, 1000.0, 4096.0}) {
    for (double base : {1.5, 2.0, 3.0, 10.0}) {
      for (int count : {1, 2, 3, 7, 8, 12}) {
        const auto got =
            Ok({"tse", std::to_string(middle), std::to_string(base), std::to_string(count)});
        const auto want = TseFormula(middle, base, count);
        ASSERT_EQ(got.size(), want.size()) << middle << " " << base << " " << count;
        for (size_t i = 0; i < got.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]);
      }
    }
  }
}

TEST(BucketRuleTest, TseClampsAtZero) {
  EXPECT_EQ(Ok({"tse", "5", "10", "4"}), (std::vector<double>{0, 5, 15, 105}));
}

TEST(BucketRuleTest, DefaultAndEmptyUseDefaultsSortedUnique) {
  EXPECT_EQ(Ok({"default"}), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(Ok({}), (std::vector<double>{1, 2, 3}));
}

TEST(BucketRuleTest, CustomerSorted) {
  EXPECT_EQ(Ok({"customer", "10", "50", "100", "500"}), (std::vector<double>{10, 50, 100, 500}));
  EXPECT_EQ(Ok({"customer", "500", "0", "2.5"}), (std::vector<double>{0, 2.5, 500}));
}

TEST(BucketRuleTest, InvalidRules) {
  EXPECT_TRUE(Fails({"linear"}));
  EXPECT_TRUE(Fails({"default", "1"}));
  EXPECT_TRUE(Fails({"tse", "1000", "2"}));
  EXPECT_TRUE(Fails({"tse", "1000", "2", "8", "9"}));
  EXPECT_TRUE(Fails({"tse", "1000", "1", "8"}));    // base must exceed 1
  EXPECT_TRUE(Fails({"tse", "1000", "2", "0"}));    // count must be positive
  EXPECT_TRUE(Fails({"tse", "0", "2", "8"}));       // middle must be positive
  EXPECT_TRUE(Fails({"tse", "1000", "2", "8.5"}));  // count is an integer
  EXPECT_TRUE(Fails({"tse", "abc", "2", "8"}));
  EXPECT_TRUE(Fails({"customer"}));
  EXPECT_TRUE(Fails({"customer", "1", "x"}));
  EXPECT_TRUE(Fails({"customer", "1", "-1"}));
  EXPECT_TRUE(Fails({"customer", "1", "1"}));
}

TEST(BucketRuleTest, ExponentialBuckets) {
  const auto b = ExponentialBuckets(0.001, 1.62, 30);
  ASSERT_EQ(b.size(), 30u);
  for (size_t i = 0; i < b.size(); ++i) EXPECT_NEAR(b[i], 0.001 * std::pow(1.62, i), 1e-9 * b[i]);
}

TEST(SglangBucketsTest, Defaults) {
  // Values from the fact sheet (reference/sglang-runtime.md section 6).
  EXPECT_EQ(DefaultTimeToFirstTokenBuckets(),
            (std::vector<double>{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100,
                                 200, 400}));
  EXPECT_EQ(DefaultE2eRequestLatencyBuckets(),
            (std::vector<double>{0.1, 0.2, 0.4, 0.6, 0.8, 1,   2,   4,   6,    8,    10,
                                 20,  40,  60,  80,  100, 200, 400, 600, 1200, 1800, 2400}));
  EXPECT_EQ(DefaultInterTokenLatencyBuckets(),
            (std::vector<double>{0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025,
                                 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400,
                                 0.600, 0.800, 1,     2,     4,     6,     8}));
  std::vector<double> retractions;
  for (int i = 0; i <= 10; ++i) retractions.push_back(i);
  for (double v : {15, 20, 25, 30, 40, 50, 75, 100}) retractions.push_back(v);
  EXPECT_EQ(DefaultRetractionsBuckets(), retractions);
  EXPECT_EQ(DefaultTokensBuckets().front(), 100);
  EXPECT_EQ(DefaultTokensBuckets().back(), 1100000);
  EXPECT_TRUE(std::is_sorted(DefaultTokensBuckets().begin(), DefaultTokensBuckets().end()));
  EXPECT_EQ(DefaultQueueTimeBuckets().front(), 0);
  EXPECT_EQ(DefaultQueueTimeBuckets().back(), 3000);
  EXPECT_EQ(DefaultPerStageLatencyBuckets().size(), 30u);
}

}  // namespace
}  // namespace radixserve::metrics

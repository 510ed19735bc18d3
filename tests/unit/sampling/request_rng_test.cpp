#include "sampling/request_rng.h"

#include <gtest/gtest.h>

#include <set>

#include "sampling/seed_source.h"

namespace radixserve::sampling {
namespace {

// Known answers of Vigna's splitmix64.c started at x = 0 (the same values Java's
// SplittableRandom(0).nextLong() returns: -2152535657050944081 == 0xe220a8397b1dcdaf).
TEST(RequestRngTest, SplitMix64KnownAnswers) {
  EXPECT_EQ(SplitMix64At(0, 0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(SplitMix64At(0, 1), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(SplitMix64At(0, 2), 0x06c45d188009454fULL);
}

TEST(RequestRngTest, CounterBasedAndSeedDependent) {
  RequestRng a(42), b(42), c(43);
  for (uint64_t step : {0ULL, 1ULL, 7ULL, 1000ULL}) {
    EXPECT_EQ(a.Bits(step), b.Bits(step));
    EXPECT_NE(a.Bits(step), c.Bits(step));
  }
  // Order of queries does not matter (no hidden state).
  const uint64_t late = a.Bits(99);
  (void)a.Bits(3);
  EXPECT_EQ(a.Bits(99), late);
}

TEST(RequestRngTest, UniformInUnitInterval) {
  RequestRng rng(7);
  double sum = 0.0;
  constexpr int kDraws = 100000;
  for (int i = 0; i < kDraws; ++i) {
    const double u = rng.Uniform(static_cast<uint64_t>(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Mean of U(0,1): 0.5, standard error 1/sqrt(12 * 1e5) ~ 0.0009; allow 5 sigma.
  EXPECT_NEAR(sum / kDraws, 0.5, 0.0046);
}

TEST(RequestRngTest, ParallelSampleSeedsDiffer) {
  EXPECT_EQ(DeriveSampleSeed(5, 0), 5u);
  std::set<uint64_t> seeds;
  for (uint64_t i = 0; i < 64; ++i) seeds.insert(DeriveSampleSeed(5, i));
  EXPECT_EQ(seeds.size(), 64u);
}

TEST(SeedSourceTest, SameRandomSeedSameSequence) {
  SeedSource a(123), b(123), c(124);
  for (int i = 0; i < 10; ++i) {
    const uint64_t x = a.NextRequestSeed();
    EXPECT_EQ(x, b.NextRequestSeed());
    EXPECT_NE(x, c.NextRequestSeed());
  }
}

}  // namespace
}  // namespace radixserve::sampling

namespace radixserve::sampling {
namespace {

TEST(SeedSourceTest, SeedForPrefersTheRequestSeed) {
  SeedSource normal(7);
  SeedSource reference(7);
  EXPECT_EQ(normal.SeedFor(123), 123u);
  EXPECT_EQ(normal.SeedFor(std::nullopt), reference.NextRequestSeed());  // request seed drew none
  SeedSource deterministic(7, /*deterministic_inference=*/true);
  EXPECT_EQ(deterministic.SeedFor(std::nullopt), 42u);
  EXPECT_EQ(deterministic.SeedFor(std::nullopt), 42u);
  EXPECT_EQ(deterministic.SeedFor(5), 5u);
}

}  // namespace
}  // namespace radixserve::sampling

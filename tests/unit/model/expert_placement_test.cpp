// ExpertPlacement: the trivial and given placements, the DeepSeek EPLB global policy's defining
// properties (checked here by brute force; tests/e2e/test_eplb.py compares the placement with
// SGLang's own implementation), and the dispatch rules.
#include "model/expert_placement.h"

#include <algorithm>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

namespace radixserve::model {
namespace {

TEST(ExpertPlacementTest, TrivialWrapsTheSlots) {
  const ExpertPlacement p = ExpertPlacement::Trivial(6, 8, 2);
  EXPECT_EQ(p.physical_to_logical(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 0, 1}));
  EXPECT_EQ(p.Replicas(0), (std::vector<int32_t>{0, 6}));
  EXPECT_EQ(p.Replicas(5), (std::vector<int32_t>{5}));
  EXPECT_EQ(p.slots_per_block(), 4);
  EXPECT_EQ(p.BlockOf(3), 0);
  EXPECT_EQ(p.BlockOf(6), 1);
}

TEST(ExpertPlacementTest, FromMapChecksTheMap) {
  EXPECT_TRUE(ExpertPlacement::FromMap({3, 2, 1, 0}, 4, 4, 2, "map").ok());
  const auto short_map = ExpertPlacement::FromMap({0, 1, 2}, 4, 4, 2, "layer 1");
  ASSERT_FALSE(short_map.ok());
  EXPECT_NE(short_map.status().message().find("layer 1: holds 3 slots"), std::string::npos);
  const auto range = ExpertPlacement::FromMap({0, 1, 2, 4}, 4, 4, 2, "map");
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("expert 4 is not one of"), std::string::npos);
  const auto uncovered = ExpertPlacement::FromMap({0, 1, 1, 2}, 4, 4, 2, "map");
  ASSERT_FALSE(uncovered.ok());
  EXPECT_NE(uncovered.status().message().find("expert 3 has no slot"), std::string::npos);
}

// The replica counts minimize the largest load per replica: no move of one replica from an
// expert to another lowers it (the greedy's optimality condition).
TEST(ExpertPlacementTest, BalancedReplicatesTheHeaviest) {
  std::mt19937 rng(3);
  for (int round = 0; round < 50; ++round) {
    const int64_t E = 4 + static_cast<int64_t>(rng() % 12), R = static_cast<int64_t>(rng() % 9);
    const int64_t blocks = 1 + static_cast<int64_t>(rng() % 4);
    const int64_t P = (E + R + blocks - 1) / blocks * blocks;
    std::vector<double> load(static_cast<size_t>(E));
    for (double& x : load) x = static_cast<double>(rng() % 1000) + 0.5;
    const ExpertPlacement p = ExpertPlacement::Balanced(load, P, blocks);
    ASSERT_EQ(p.num_physical(), P);
    ASSERT_EQ(p.num_logical(), E);
    double worst = 0;
    for (int32_t j = 0; j < E; ++j) {
      ASSERT_FALSE(p.Replicas(j).empty());
      worst = std::max(worst, load[j] / static_cast<double>(p.Replicas(j).size()));
    }
    for (int32_t a = 0; a < E; ++a) {
      const double n = static_cast<double>(p.Replicas(a).size());
      if (n < 2) continue;
      for (int32_t b = 0; b < E; ++b) {
        if (a == b) continue;
        const double after =
            std::max(load[a] / (n - 1), load[b] / static_cast<double>(p.Replicas(b).size() + 1));
        EXPECT_GE(after, worst - 1e-6) << "moving a replica from " << a << " to " << b;
      }
    }
  }
}

// Two heavy experts in the first block: the extra slots go to them and the packing evens the
// blocks out, where the trivial placement leaves one block with nearly all the work.
TEST(ExpertPlacementTest, BalancedEvensASkewedLoad) {
  std::vector<double> load(8, 10.0);
  load[2] = load[3] = 300.0;
  const ExpertPlacement trivial = ExpertPlacement::Trivial(8, 10, 2);
  const ExpertPlacement p = ExpertPlacement::Balanced(load, 10, 2);
  EXPECT_EQ(p.Replicas(2).size(), 2u);
  EXPECT_EQ(p.Replicas(3).size(), 2u);
  EXPECT_LT(trivial.Balancedness(load), 0.6);
  EXPECT_DOUBLE_EQ(p.Balancedness(load), 1.0);
}

TEST(ExpertPlacementTest, KeepingSlotsOnlyReordersWithinBlocks) {
  const auto now = ExpertPlacement::FromMap({0, 1, 2, 3, 4, 5}, 6, 6, 2, "now");
  const auto next = ExpertPlacement::FromMap({5, 2, 0, 1, 4, 3}, 6, 6, 2, "next");
  ASSERT_TRUE(now.ok() && next.ok());
  // Block 0 gets {0, 2, 5}: 0 and 2 stay in slots 0 and 2; block 1 gets {1, 3, 4}: 3, 4 stay.
  EXPECT_EQ(next->KeepingSlotsOf(*now).physical_to_logical(),
            (std::vector<int32_t>{0, 5, 2, 3, 4, 1}));
}

TEST(ExpertPlacementTest, DispatchPicksAReplicaEveryRankAgreesOn) {
  const ExpertPlacement p = ExpertPlacement::Trivial(4, 8, 2);  // expert j: slots j, j + 4
  for (const ExpertDispatch d : {ExpertDispatch::kStatic, ExpertDispatch::kDynamic}) {
    std::vector<int64_t> uses(8, 0);
    for (int64_t t = 0; t < 400; ++t) {
      for (int32_t j = 0; j < 4; ++j) {
        const int32_t slot = p.Dispatch(d, j, t, 1, 5, 9);
        ASSERT_EQ(p.physical_to_logical()[static_cast<size_t>(slot)], j);
        EXPECT_EQ(slot, p.Dispatch(d, j, t, 1, 5, 9));  // a function of its inputs only
        ++uses[static_cast<size_t>(slot)];
      }
    }
    // Both replicas of every expert carry a share.
    for (const int64_t n : uses) EXPECT_GT(n, 100);
  }
  // Static: block b's own replica when it has one.
  EXPECT_EQ(p.Dispatch(ExpertDispatch::kStatic, 2, /*t=*/0, 0, 0, 0), 2);  // block 0 holds slot 2
  EXPECT_EQ(p.Dispatch(ExpertDispatch::kStatic, 2, /*t=*/1, 0, 0, 0), 6);  // block 1 holds slot 6
}

TEST(ExpertPlacementTest, BalancednessOfBlocks) {
  const ExpertPlacement p = ExpertPlacement::Trivial(4, 4, 2);
  EXPECT_DOUBLE_EQ(p.Balancedness({1, 1, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(p.Balancedness({3, 1, 0, 0}), 0.5);
  EXPECT_DOUBLE_EQ(p.Balancedness({0, 0, 0, 0}), 1.0);
}

}  // namespace
}  // namespace radixserve::model

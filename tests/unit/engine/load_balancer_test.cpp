// LoadBalancer: each method's choice from its own in-flight counts.
#include "engine/load_balancer.h"

#include <gtest/gtest.h>

namespace radixserve::engine {
namespace {

TEST(LoadBalancerTest, ParsesSglangChoices) {
  EXPECT_EQ(*ParseLoadBalanceMethod("round_robin"), LoadBalanceMethod::kRoundRobin);
  EXPECT_EQ(*ParseLoadBalanceMethod("shortest_queue"), LoadBalanceMethod::kShortestQueue);
  EXPECT_EQ(*ParseLoadBalanceMethod("minimum_tokens"), LoadBalanceMethod::kMinimumTokens);
  EXPECT_FALSE(ParseLoadBalanceMethod("random").ok());
}

TEST(LoadBalancerTest, RoundRobinTakesReplicasInTurnWhateverTheLoad) {
  LoadBalancer lb(LoadBalanceMethod::kRoundRobin, 3);
  EXPECT_EQ(lb.Assign(1000), 0);
  EXPECT_EQ(lb.Assign(1), 1);
  EXPECT_EQ(lb.Assign(1), 2);
  EXPECT_EQ(lb.Assign(1), 0);
  EXPECT_EQ(lb.requests_in_flight(0), 2);
  EXPECT_EQ(lb.tokens_in_flight(0), 1001);
}

TEST(LoadBalancerTest, ShortestQueueCountsRequestsTiesToLowestRank) {
  LoadBalancer lb(LoadBalanceMethod::kShortestQueue, 2);
  EXPECT_EQ(lb.Assign(500), 0);
  EXPECT_EQ(lb.Assign(1), 1);
  EXPECT_EQ(lb.Assign(1), 0);  // 1 vs 1: lowest rank
  lb.Release(0, 500);
  lb.Release(0, 1);
  EXPECT_EQ(lb.requests_in_flight(0), 0);
  EXPECT_EQ(lb.Assign(1), 0);  // 0 vs 1
  EXPECT_EQ(lb.assigned(0), 3);
  EXPECT_EQ(lb.assigned(1), 1);
}

TEST(LoadBalancerTest, MinimumTokensCountsPromptAndGeneratedTokens) {
  LoadBalancer lb(LoadBalanceMethod::kMinimumTokens, 2);
  EXPECT_EQ(lb.Assign(100), 0);
  EXPECT_EQ(lb.Assign(30), 1);
  EXPECT_EQ(lb.Assign(30), 1);  // 100 vs 30
  EXPECT_EQ(lb.Assign(10), 1);  // 100 vs 60
  lb.AddTokens(1, 50);          // replica 1 generated: 120 in flight
  EXPECT_EQ(lb.tokens_in_flight(1), 120);
  EXPECT_EQ(lb.Assign(5), 0);  // 100 vs 120
  lb.Release(1, 80);           // the first 30-token request ended after 50 output tokens
  EXPECT_EQ(lb.tokens_in_flight(1), 40);
  EXPECT_EQ(lb.requests_in_flight(1), 2);
  EXPECT_EQ(lb.Assign(1), 1);  // 105 vs 40
}

}  // namespace
}  // namespace radixserve::engine

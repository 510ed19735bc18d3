// DpEngine on stories260K: --dp-size 2 spreads requests over both replicas with each load
// balance method, greedy outputs equal ReferenceGreedy (each request alone through the model),
// per-replica stats, broadcast abort and flush, and the leak check of every replica.
// GCC 12 reports a false -Wrestrict inside std::string operator+ at -O3 (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

#include "engine/dp_engine.h"

#include <gtest/gtest.h>

#include "engine_test_util.h"

namespace radixserve::engine {
namespace {

using testing::Collector;

std::vector<std::vector<int32_t>> Prompts(size_t n) {
  const tokenizer::Tokenizer& tok = *testing::LoadStories().tokenizer;
  const std::vector<std::string> texts = {"Once upon a time, there was a little girl",
                                          "The dog ran to the park and", "Tom had a red ball.",
                                          "One day, Lily saw a big"};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < n; ++i) {
    std::vector<int32_t> ids;
    for (auto id : tok.Encode(texts[i % texts.size()] + std::string(i / texts.size(), ' ')))
      ids.push_back(static_cast<int32_t>(id));
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

args::ServerArgs DpArgs(const char* method) {
  args::ServerArgs args = testing::BaseArgs();
  args.Set("dp-size", 2);
  args.Set("load-balance-method", method);
  return args;
}

class DpEngineMethodTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DpEngineMethodTest, BothReplicasServeAndOutputsEqualAlone) {
  constexpr int64_t kMaxNew = 16;
  const auto prompts = Prompts(16);
  auto engine = testing::MakeEngine(DpArgs(GetParam()));
  ASSERT_NE(dynamic_cast<DpEngine*>(engine.get()), nullptr);
  Collector collector(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(engine
                    ->Submit(testing::GreedyRequest("r" + std::to_string(i), prompts[i], kMaxNew),
                             collector.Sink(i))
                    .ok());
  }
  collector.Wait(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(collector[i].tokens, testing::ReferenceGreedy(prompts[i], kMaxNew)) << i;
  }
  const std::vector<EngineStats> replicas = engine->ReplicaStats();
  ASSERT_EQ(replicas.size(), 2u);
  int64_t prompt_tokens = 0;
  for (size_t r = 0; r < replicas.size(); ++r) {
    EXPECT_EQ(replicas[r].dp_rank, static_cast<int32_t>(r));
    EXPECT_GT(replicas[r].prompt_tokens_total, 0) << "replica " << r << " got no request";
    EXPECT_EQ(replicas[r].max_total_num_tokens, 4096);  // --max-total-tokens 8192 split in two
    prompt_tokens += replicas[r].prompt_tokens_total;
  }
  const EngineStats total = engine->Stats();
  EXPECT_EQ(total.prompt_tokens_total, prompt_tokens);
  EXPECT_EQ(total.max_total_num_tokens, 8192);
  const auto& balancer = static_cast<DpEngine*>(engine.get())->balancer();
  EXPECT_EQ(balancer.requests_in_flight(0) + balancer.requests_in_flight(1), 0);
  EXPECT_EQ(balancer.tokens_in_flight(0) + balancer.tokens_in_flight(1), 0);
  const Status leaks = engine->CheckLeaks();
  EXPECT_TRUE(leaks.ok()) << leaks.message();
  EXPECT_TRUE(engine->FlushCache().ok());
  engine->Shutdown();
}

INSTANTIATE_TEST_SUITE_P(Methods, DpEngineMethodTest,
                         ::testing::Values("round_robin", "shortest_queue", "minimum_tokens"));

TEST(DpEngineTest, AbortReachesEveryReplica) {
  const auto prompts = Prompts(4);
  auto engine = testing::MakeEngine(DpArgs("round_robin"));
  Collector collector(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(engine
                    ->Submit(testing::GreedyRequest("long-" + std::to_string(i), prompts[i], 4000),
                             collector.Sink(i))
                    .ok());
  }
  engine->Abort("long-", AbortMatch::kRidPrefix);
  collector.Wait(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(collector[i].finish.has_value());
    EXPECT_EQ(collector[i].finish->kind, FinishKind::kAbort) << i;
  }
  const Status leaks = engine->CheckLeaks();
  EXPECT_TRUE(leaks.ok()) << leaks.message();
  engine->Shutdown();
}

TEST(DpEngineTest, RejectedSubmitIsNotCountedInFlight) {
  auto engine = testing::MakeEngine(DpArgs("shortest_queue"));
  Collector collector(1);
  GenerateRequest bad = testing::GreedyRequest("bad", {}, 4);  // empty prompt: rejected
  EXPECT_FALSE(engine->Submit(std::move(bad), collector.Sink(0)).ok());
  const auto& balancer = static_cast<DpEngine*>(engine.get())->balancer();
  EXPECT_EQ(balancer.requests_in_flight(0), 0);
  EXPECT_EQ(balancer.tokens_in_flight(0), 0);
  engine->Shutdown();
}

}  // namespace
}  // namespace radixserve::engine

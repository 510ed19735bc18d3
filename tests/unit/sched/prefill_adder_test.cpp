// PrefillAdder budget rules (reference/sglang-runtime.md 2.5), checked with hand-computed numbers.
#include "sched/prefill_adder.h"

#include <gtest/gtest.h>

#include "sched_test_util.h"

namespace radixserve::sched {
namespace {

using testing::MakeMemory;
using testing::MakeSeq;

TEST(PrefillAdderTest, AdmissionChargesExtendPlusClippedNewTokens) {
  auto memory = MakeMemory(1000);
  SchedulerConfig config;
  config.max_prefill_tokens = 100;
  PrefillAdder adder(config, *memory, {}, 0.7, 0);
  auto a = MakeSeq(1, 30, 50);
  EXPECT_EQ(adder.AddOneReq(a.get()), AddResult::kContinue);
  EXPECT_DOUBLE_EQ(adder.rem_total_tokens(), 1000.0 - 30 - 50);
  EXPECT_DOUBLE_EQ(adder.cur_rem_tokens(), 1000.0 - 30);
  EXPECT_EQ(adder.rem_input_tokens(), 70);
  // ceil_page(80) >= rem_input 70 with a non-empty batch: OTHER.
  auto b = MakeSeq(2, 80, 10, 5000);
  EXPECT_EQ(adder.AddOneReq(b.get()), AddResult::kOther);
  ASSERT_EQ(adder.planned().size(), 1u);
  EXPECT_TRUE(adder.planned()[0].samples);
}

TEST(PrefillAdderTest, FirstRequestMayExceedMaxPrefillTokens) {
  auto memory = MakeMemory(1000);
  SchedulerConfig config;
  config.max_prefill_tokens = 16;
  PrefillAdder adder(config, *memory, {}, 0.7, 0);
  auto a = MakeSeq(1, 40, 8);
  // Admitted, and the input budget is now exhausted: OTHER ends the pass.
  EXPECT_EQ(adder.AddOneReq(a.get()), AddResult::kOther);
  EXPECT_EQ(adder.planned().size(), 1u);
  EXPECT_EQ(adder.rem_input_tokens(), 16 - 40);
}

TEST(PrefillAdderTest, RunningReservationUsesRatioAndClip) {
  auto memory = MakeMemory(10000);
  SchedulerConfig config;
  auto running = MakeSeq(1, 10, 9000);  // clipped to 4096
  running->output_ids = {1, 2, 3, 4};   // 8996 remaining -> 4096
  auto small = MakeSeq(2, 10, 100);
  small->output_ids = {1};  // 99 remaining
  PrefillAdder adder(config, *memory, {running.get(), small.get()}, 0.5, 0);
  EXPECT_DOUBLE_EQ(adder.rem_total_tokens(), 10000.0 - 0.5 * 4096 - 0.5 * 99);
  // A request whose extend + new tokens reach rem_total: NO_TOKEN.
  auto big = MakeSeq(3, 7000, 1000);
  EXPECT_EQ(adder.AddOneReq(big.get()), AddResult::kNoToken);
  EXPECT_TRUE(adder.planned().empty());
}

// LightLLM's --router_token_ratio / --router_max_new_token_len: below the busy ratio a request's
// output is counted as at most the idle estimate; at or above it, SGLang's 4096 clip.
TEST(PrefillAdderTest, IdlePoolCountsOutputUpToTheIdleEstimate) {
  auto memory = MakeMemory(10000);
  SchedulerConfig config;
  config.busy_token_ratio = 0.5;
  config.idle_new_tokens_estimate = 100;
  auto running = MakeSeq(1, 10, 9000);
  PrefillAdder idle(config, *memory, {running.get()}, 0.5, 0);
  EXPECT_DOUBLE_EQ(idle.rem_total_tokens(), 10000.0 - 0.5 * 100);
  auto next = MakeSeq(2, 10, 5000, 3000);
  EXPECT_EQ(idle.ClippedNewTokens(*next), 100);
  EXPECT_EQ(idle.AddOneReq(next.get()), AddResult::kContinue);
  EXPECT_DOUBLE_EQ(idle.rem_total_tokens(), 10000.0 - 0.5 * 100 - 10 - 100);

  config.busy_token_ratio = 0.0;  // usage 0 is not below 0: busy, SGLang's clip
  PrefillAdder busy(config, *memory, {running.get()}, 0.5, 0);
  EXPECT_DOUBLE_EQ(busy.rem_total_tokens(), 10000.0 - 0.5 * 4096);
}

TEST(PrefillAdderTest, ChunksToPageFloorOfRemainingChunkBudget) {
  auto memory = MakeMemory(4096, /*page_size=*/16);
  SchedulerConfig config;
  config.chunked_prefill_size = 64;
  PrefillAdder adder(config, *memory, {}, 0.7, /*mixed_decode_tokens=*/10);
  EXPECT_EQ(*adder.rem_chunk_tokens(), 54);
  auto a = MakeSeq(1, 100, 8);
  // ceil_page(100) > 54: truncate to floor_page(54) = 48, reserve no new tokens.
  adder.AddOneReq(a.get());
  ASSERT_EQ(adder.planned().size(), 1u);
  EXPECT_EQ(adder.planned()[0].extend_len, 48u);
  EXPECT_FALSE(adder.planned()[0].samples);
  EXPECT_EQ(adder.new_chunked(), a.get());
  EXPECT_DOUBLE_EQ(adder.rem_total_tokens(), 4096.0 - 48);
}

TEST(PrefillAdderTest, PrefillMaxRequestsLimitsTheBatch) {
  auto memory = MakeMemory(1000);
  SchedulerConfig config;
  config.prefill_max_requests = 1;
  PrefillAdder adder(config, *memory, {}, 0.7, 0);
  auto a = MakeSeq(1, 5, 5);
  auto b = MakeSeq(2, 5, 5, 3000);
  EXPECT_EQ(adder.AddOneReq(a.get()), AddResult::kContinue);
  EXPECT_EQ(adder.AddOneReq(b.get()), AddResult::kOther);
}

}  // namespace
}  // namespace radixserve::sched

namespace radixserve::sched {
namespace {

// ignore_eos with the radix cache disabled: requests are simulated finishing in order of tokens
// left, so memory freed by an early finisher counts.
TEST(PrefillAdderIgnoreEosTest, SimulatesFinishOrder) {
  auto memory = testing::MakeMemory(100, 1, /*radix=*/false);
  SchedulerConfig config;
  {
    PrefillAdder adder(config, *memory, {}, 0.7, 0);
    auto a = testing::MakeSeq(1, 40, 10);
    a->ignore_eos = true;
    auto b = testing::MakeSeq(2, 10, 45, 3000);
    b->ignore_eos = true;
    EXPECT_EQ(adder.AddOneReq(a.get()), AddResult::kContinue);
    // The ordinary rule would refuse b (10 + 45 >= 100 - 50); the simulation admits it:
    // states (10 left, 40 held), (45, 10); free 50: 50 - 2 * 10 = 30 > 2, then 50 + 40 - 45 > 1.
    adder.AddOneReq(b.get());
    EXPECT_EQ(adder.planned().size(), 2u);
  }
  {
    PrefillAdder adder(config, *memory, {}, 0.7, 0);
    auto a = testing::MakeSeq(1, 10, 50);
    a->ignore_eos = true;
    auto b = testing::MakeSeq(2, 10, 50, 3000);
    b->ignore_eos = true;
    EXPECT_EQ(adder.AddOneReq(a.get()), AddResult::kContinue);
    // 90 - 10 - 2 * 50 <= 2 * 1: refused.
    EXPECT_EQ(adder.AddOneReq(b.get()), AddResult::kNoToken);
    EXPECT_EQ(adder.planned().size(), 1u);
  }
}

}  // namespace
}  // namespace radixserve::sched

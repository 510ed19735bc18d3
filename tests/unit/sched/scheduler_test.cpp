// Scheduler step plans without a model: chunking, prefix matching, mixed chunk, retraction,
// priority preemption and the queue limit.
#include "sched/scheduler.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "sched_test_util.h"

namespace radixserve::sched {
namespace {

using testing::Add;
using testing::ExtendOf;
using testing::FakeRun;
using testing::Keep;
using testing::MakeMemory;
using testing::MakeSeq;

std::unique_ptr<Scheduler> MakeScheduler(const SchedulerConfig& config, kv::KvMemory* memory) {
  auto s = Scheduler::Create(config, memory);
  RADIX_CHECK(s.ok());
  return std::move(s).value();
}

TEST(SchedulerTest, ChunkedPrefillOneRequestAtATime) {
  auto memory = MakeMemory(4096);
  SchedulerConfig config;
  config.chunked_prefill_size = 64;
  auto s = MakeScheduler(config, memory.get());
  Sequence* a = Add(*s, MakeSeq(1, 150, 4));
  Sequence* b = Add(*s, MakeSeq(2, 10, 4, 5000));
  StepPlan p1 = s->PlanStep();
  EXPECT_EQ(p1.kind, StepKind::kExtend);
  ASSERT_EQ(p1.entries.size(), 1u);  // chunk budget used up by a
  EXPECT_EQ(ExtendOf(p1, a), 64u);
  EXPECT_FALSE(p1.entries[0].samples);
  FakeRun(*s, p1);
  EXPECT_EQ(s->chunked(), a);
  StepPlan p2 = s->PlanStep();
  EXPECT_EQ(ExtendOf(p2, a), 64u);
  FakeRun(*s, p2);
  StepPlan p3 = s->PlanStep();
  EXPECT_EQ(ExtendOf(p3, a), 22u);
  EXPECT_TRUE(p3.entries[0].samples);
  EXPECT_EQ(ExtendOf(p3, b), 10u);  // b fits in what is left of the chunk budget
  FakeRun(*s, p3);
  EXPECT_EQ(s->chunked(), nullptr);
  EXPECT_EQ(s->running().size(), 2u);
  StepPlan p4 = s->PlanStep();
  EXPECT_EQ(p4.kind, StepKind::kDecode);
  EXPECT_EQ(p4.entries.size(), 2u);
  FakeRun(*s, p4);
  while (!s->idle()) FakeRun(*s, s->PlanStep());
  EXPECT_TRUE(memory->CheckIdle().ok()) << memory->CheckIdle().message();
}

TEST(SchedulerTest, PrefixMatchIsPageAlignedAndNeverWholePrompt) {
  for (int32_t page : {1, 4}) {
    auto memory = MakeMemory(4096, page);
    auto s = MakeScheduler(SchedulerConfig{}, memory.get());
    Sequence* first = Add(*s, MakeSeq(1, 18, 1));
    StepPlan p = s->PlanStep();
    FakeRun(*s, p);  // finishes after one token: 18 prompt tokens cached (page-aligned)
    EXPECT_TRUE(s->idle());
    (void)first;
    Sequence* again = Add(*s, MakeSeq(2, 18, 1));
    StepPlan q = s->PlanStep();
    ASSERT_EQ(q.entries.size(), 1u);
    // At most 17 tokens may match (one is recomputed), aligned down to the page.
    const size_t expected = 17 / static_cast<size_t>(page) * static_cast<size_t>(page);
    EXPECT_EQ(q.entries[0].prefix_len, expected) << "page " << page;
    EXPECT_EQ(q.cached_tokens, expected);
    EXPECT_EQ(again->cached_tokens, expected);
    FakeRun(*s, q);
    EXPECT_TRUE(memory->CheckIdle().ok()) << memory->CheckIdle().message();
  }
}

TEST(SchedulerTest, MixedChunkPutsDecodeTokensIntoTheExtendBatch) {
  auto memory = MakeMemory(4096);
  SchedulerConfig config;
  config.chunked_prefill_size = 32;
  config.enable_mixed_chunk = true;
  auto s = MakeScheduler(config, memory.get());
  Sequence* a = Add(*s, MakeSeq(1, 8, 10));
  FakeRun(*s, s->PlanStep());
  Sequence* b = Add(*s, MakeSeq(2, 100, 4, 5000));
  StepPlan p = s->PlanStep();
  EXPECT_EQ(p.kind, StepKind::kMixed);
  // The chunk budget is 32 minus one decode token.
  EXPECT_EQ(ExtendOf(p, b), 31u);
  ASSERT_EQ(p.entries.size(), 2u);
  EXPECT_TRUE(p.entries[1].is_decode);
  EXPECT_EQ(p.entries[1].seq, a);
  FakeRun(*s, p);
  while (!s->idle()) FakeRun(*s, s->PlanStep());
  EXPECT_TRUE(memory->CheckIdle().ok()) << memory->CheckIdle().message();
}

TEST(SchedulerTest, DecodeOutOfMemoryRetractsFewestOutputsLongestPrompt) {
  // 128 slots, no prefix sharing: 3 sequences admitted optimistically run out while decoding.
  auto memory = MakeMemory(128, 1, /*radix=*/false);
  SchedulerConfig config;
  config.schedule_conservativeness = 0.01;  // admit almost without reserving decode room
  auto s = MakeScheduler(config, memory.get());
  Sequence* a = Add(*s, MakeSeq(1, 10, 40));
  Sequence* b = Add(*s, MakeSeq(2, 14, 40, 3000));
  for (int i = 0; i < 4; ++i) FakeRun(*s, s->PlanStep());
  ASSERT_EQ(a->output_ids.size(), 4u);
  // c arrives later: fewest outputs once decoding starts.
  Sequence* c = Add(*s, MakeSeq(3, 12, 40, 6000));
  StepPlan pc = s->PlanStep();
  ASSERT_EQ(ExtendOf(pc, c), 12u);
  FakeRun(*s, pc);
  StepPlan plan;
  for (int i = 0; i < 64 && plan.dropped.empty(); ++i) {
    plan = s->PlanStep();
    if (plan.dropped.empty()) FakeRun(*s, plan);
  }
  ASSERT_EQ(plan.dropped.size(), 1u);
  EXPECT_EQ(plan.dropped[0].seq, c);
  EXPECT_EQ(plan.dropped[0].reason, DropReason::kRetracted);
  EXPECT_EQ(c->retraction_count, 1);
  EXPECT_FALSE(c->admitted);
  ASSERT_EQ(s->waiting().size(), 1u);
  EXPECT_EQ(s->waiting()[0], c);
  // Ratio over the survivors: (decoded + 20 * 2) / (max_new sum + 1).
  const double decoded = static_cast<double>(a->output_ids.size() + b->output_ids.size());
  EXPECT_DOUBLE_EQ(plan.ratio_after, std::min(1.0, (decoded + 40.0) / 81.0));
  EXPECT_DOUBLE_EQ(s->new_token_ratio(), plan.ratio_after);
  EXPECT_EQ(s->num_retractions(), 1);
  std::vector<Sequence*> released;
  FakeRun(*s, plan, &released);
  while (!s->idle()) FakeRun(*s, s->PlanStep(), &released);
  ASSERT_EQ(released.size(), 3u);
  for (const auto& seq : released) EXPECT_EQ(seq->output_ids.size(), 40u);
  EXPECT_TRUE(memory->CheckIdle().ok()) << memory->CheckIdle().message();
}

TEST(SchedulerTest, NewTokenRatioDecaysPerDecodeStepAndResetsWhenIdle) {
  auto memory = MakeMemory(4096);
  SchedulerConfig config;
  auto s = MakeScheduler(config, memory.get());
  Add(*s, MakeSeq(1, 4, 3));
  FakeRun(*s, s->PlanStep());
  const double init = config.init_new_token_ratio();
  EXPECT_DOUBLE_EQ(init, 0.7);
  FakeRun(*s, s->PlanStep());  // decode
  EXPECT_DOUBLE_EQ(s->new_token_ratio(), init - (0.7 - 0.098) / 600.0);
  while (!s->idle()) FakeRun(*s, s->PlanStep());
  (void)s->PlanStep();
  EXPECT_DOUBLE_EQ(s->new_token_ratio(), init);
}

TEST(SchedulerTest, PriorityPreemptionAboveThreshold) {
  auto memory = MakeMemory(4096);
  SchedulerConfig config;
  config.enable_priority_scheduling = true;
  config.max_running_requests = 1;
  auto s = MakeScheduler(config, memory.get());
  auto low = MakeSeq(1, 8, 50);
  low->priority = 0;
  Sequence* low_raw = Add(*s, std::move(low));
  FakeRun(*s, s->PlanStep());
  auto near = MakeSeq(2, 8, 5, 3000);
  near->priority = 10;  // difference 10 is not > threshold 10
  Sequence* near_raw = Add(*s, std::move(near));
  StepPlan p = s->PlanStep();
  EXPECT_TRUE(p.dropped.empty());
  EXPECT_EQ(p.kind, StepKind::kDecode);
  FakeRun(*s, p);
  auto high = MakeSeq(3, 8, 5, 6000);
  high->priority = 11;
  Sequence* high_raw = Add(*s, std::move(high));
  StepPlan q = s->PlanStep();
  ASSERT_EQ(q.dropped.size(), 1u);
  EXPECT_EQ(q.dropped[0].seq, low_raw);
  EXPECT_EQ(q.dropped[0].reason, DropReason::kPreempted);
  FakeRun(*s, q);
  // Next pass admits the most important waiting request first.
  StepPlan r = s->PlanStep();
  ASSERT_FALSE(r.entries.empty());
  EXPECT_EQ(r.entries[0].seq, high_raw);
  FakeRun(*s, r);
  (void)near_raw;
  while (!s->idle()) FakeRun(*s, s->PlanStep());
  EXPECT_TRUE(memory->CheckIdle().ok()) << memory->CheckIdle().message();
}

TEST(SchedulerTest, QueueLimitRejectsOrDisplacesLessImportant) {
  auto memory = MakeMemory(4096);
  SchedulerConfig config;
  config.max_queued_requests = 2;
  auto s = MakeScheduler(config, memory.get());
  Add(*s, MakeSeq(1, 4, 4));
  Add(*s, MakeSeq(2, 4, 4));
  Status full = s->Enqueue(Keep(MakeSeq(3, 4, 4)), nullptr);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(), "The request queue is full.");

  config.enable_priority_scheduling = true;
  auto p = MakeScheduler(config, memory.get());
  auto a = MakeSeq(1, 4, 4);
  a->priority = 5;
  auto b = MakeSeq(2, 4, 4);
  b->priority = 1;
  Add(*p, std::move(a));
  Add(*p, std::move(b));
  auto same = MakeSeq(3, 4, 4);
  same->priority = 1;  // not strictly more important than the least important (1)
  EXPECT_FALSE(p->Enqueue(Keep(std::move(same)), nullptr).ok());
  auto more = MakeSeq(4, 4, 4);
  more->priority = 3;
  Sequence* displaced = nullptr;
  EXPECT_TRUE(p->Enqueue(Keep(std::move(more)), &displaced).ok());
  ASSERT_NE(displaced, nullptr);
  EXPECT_EQ(displaced->id, 2u);
}

// Speculative decode: a decode entry carries the drafts after the last token; AcceptDrafts keeps
// the K/V of the accepted ones and frees the pages wholly past the kept length.
TEST(SchedulerTest, DraftsExtendTheDecodeAndRejectedSlotsAreFreed) {
  for (int32_t page : {1, 4}) {
    for (size_t accepted = 0; accepted <= 4; ++accepted) {
      auto memory = MakeMemory(4096, page, /*radix=*/false);
      auto s = MakeScheduler(SchedulerConfig{}, memory.get());
      Sequence* a = Add(*s, MakeSeq(1, 10, 100));
      FakeRun(*s, s->PlanStep());  // prefill: kv_len 10, one output token
      a->draft_ids = {11, 12, 13, 14};
      StepPlan p = s->PlanStep();
      ASSERT_EQ(p.entries.size(), 1u);
      EXPECT_EQ(p.entries[0].extend_len, 5u);
      EXPECT_EQ(p.entries[0].num_drafts, 4u);
      EXPECT_EQ(a->fill_at(11), 11);  // the first draft follows the fill ids
      s->CompleteStep(p);
      EXPECT_EQ(a->kv_len, 11u);
      EXPECT_EQ(a->draft_kv_len, 4u);
      for (size_t i = 0; i <= accepted; ++i) a->output_ids.push_back(static_cast<int32_t>(20 + i));
      s->AcceptDrafts(a, accepted);
      EXPECT_EQ(a->kv_len, 11 + accepted);
      EXPECT_EQ(a->kv_len + 1, a->fill_len());
      EXPECT_TRUE(a->draft_ids.empty());
      const auto pg = static_cast<size_t>(page);
      EXPECT_EQ(memory->pool().used_size(), (a->kv_len + pg - 1) / pg * pg)
          << "page " << page << " accepted " << accepted;
      StepPlan next = s->PlanStep();  // an ordinary decode continues the kept page
      ASSERT_EQ(next.entries.size(), 1u);
      EXPECT_EQ(next.entries[0].extend_len, 1u);
      FakeRun(*s, next);
      s->Release(a);
      EXPECT_TRUE(memory->CheckIdle().ok()) << memory->CheckIdle().message();
    }
  }
}

// Tree drafts: the accepted path's K/V ends up right after the kept positions, by slot swaps with
// pages of one slot and by row copies with larger pages; everything else is freed.
TEST(SchedulerTest, AcceptingATreePathMovesItsKvNextToTheSequence) {
  for (int32_t page : {1, 4}) {
    auto memory = MakeMemory(4096, page, /*radix=*/false);
    auto s = MakeScheduler(SchedulerConfig{}, memory.get());
    Sequence* a = Add(*s, MakeSeq(1, 10, 100));
    FakeRun(*s, s->PlanStep());  // prefill: kv_len 10, one output token
    a->draft_ids = {11, 12, 13, 14, 15, 16};
    a->draft_parents = {-1, -1, 0, 1, 1, 3};  // 1 -> 3 -> 5 is a root-to-leaf path
    StepPlan p = s->PlanStep();
    ASSERT_EQ(p.entries.size(), 1u);
    EXPECT_EQ(p.entries[0].num_drafts, 6u);
    s->CompleteStep(p);
    ASSERT_EQ(a->kv_len, 11u);
    // Each position's K and V hold the position, as the forward pass would have written them.
    kv::KvStorage& storage = memory->pool().storage();
    std::span<const int32_t> row = memory->req_pool().Row(a->kv.req_pool_slot);
    for (size_t pos = 0; pos < 17; ++pos) {
      const auto value = static_cast<float>(pos);
      storage.StoreKv(0, row.subspan(pos, 1), &value, &value);
    }
    const std::vector<int32_t> path = {1, 3, 5};
    for (size_t i = 0; i <= path.size(); ++i) a->output_ids.push_back(static_cast<int32_t>(20 + i));
    s->AcceptDrafts(a, std::span<const int32_t>(path));
    EXPECT_EQ(a->kv_len, 14u);
    EXPECT_TRUE(a->draft_ids.empty() && a->draft_parents.empty());
    for (size_t pos = 0; pos < a->kv_len; ++pos) {
      float k = -1, v = -1;
      storage.LoadKv(0, memory->req_pool().Row(a->kv.req_pool_slot)[pos], &k, &v);
      const size_t want = pos < 11 ? pos : 11 + static_cast<size_t>(path[pos - 11]);
      EXPECT_EQ(k, static_cast<float>(want)) << "page " << page << " pos " << pos;
      EXPECT_EQ(v, static_cast<float>(want)) << "page " << page << " pos " << pos;
    }
    const auto pg = static_cast<size_t>(page);
    EXPECT_EQ(memory->pool().used_size(), (a->kv_len + pg - 1) / pg * pg) << "page " << page;
    FakeRun(*s, s->PlanStep());
    s->Release(a);
    EXPECT_TRUE(memory->CheckIdle().ok()) << memory->CheckIdle().message();
  }
}

TEST(SchedulerTest, ReleasingBeforeAcceptingFreesTheDraftSlots) {
  auto memory = MakeMemory(4096, 4);
  auto s = MakeScheduler(SchedulerConfig{}, memory.get());
  Sequence* a = Add(*s, MakeSeq(1, 10, 100));
  FakeRun(*s, s->PlanStep());
  a->draft_ids = {11, 12, 13, 14, 15, 16};
  StepPlan p = s->PlanStep();
  s->CompleteStep(p);
  s->Release(a, /*cache_kv=*/true);  // e.g. the forward failed
  EXPECT_TRUE(memory->CheckIdle().ok()) << memory->CheckIdle().message();
}

TEST(SchedulerTest, DraftsGiveWayBeforeRetraction) {
  // Room for both sequences' next token, not for their drafts.
  auto memory = MakeMemory(48, 1, /*radix=*/false);
  auto s = MakeScheduler(SchedulerConfig{}, memory.get());
  Sequence* a = Add(*s, MakeSeq(1, 20, 3, 1000));
  Sequence* b = Add(*s, MakeSeq(2, 20, 3, 5000));
  FakeRun(*s, s->PlanStep());
  a->draft_ids.assign(8, 3);
  b->draft_ids.assign(8, 3);
  StepPlan p = s->PlanStep();
  EXPECT_TRUE(p.dropped.empty());
  ASSERT_EQ(p.entries.size(), 2u);
  for (const StepEntry& e : p.entries) {
    EXPECT_EQ(e.num_drafts, 0u);
    EXPECT_EQ(e.extend_len, 1u);
  }
}

TEST(SchedulerTest, MaxLorasPerBatchKeepsOtherAdaptersWaiting) {
  auto memory = MakeMemory(4096);
  SchedulerConfig config;
  config.max_loras_per_batch = 2;
  auto s = MakeScheduler(config, memory.get());
  auto with_lora = [](std::unique_ptr<Sequence> seq, uint64_t lora) {
    seq->lora_id = lora;
    return seq;
  };
  Sequence* a = Add(*s, with_lora(MakeSeq(1, 8, 3, 1000), 11));
  Sequence* b = Add(*s, with_lora(MakeSeq(2, 8, 3, 2000), 12));
  Sequence* c = Add(*s, with_lora(MakeSeq(3, 8, 3, 3000), 13));   // a third adapter: waits
  Sequence* base = Add(*s, MakeSeq(4, 8, 3, 4000));               // the base model never counts
  Sequence* a2 = Add(*s, with_lora(MakeSeq(5, 8, 3, 5000), 11));  // an adapter already in
  StepPlan p1 = s->PlanStep();
  EXPECT_EQ(ExtendOf(p1, a), 8u);
  EXPECT_EQ(ExtendOf(p1, b), 8u);
  EXPECT_EQ(ExtendOf(p1, c), 0u);
  EXPECT_EQ(ExtendOf(p1, base), 8u);
  EXPECT_EQ(ExtendOf(p1, a2), 8u);
  FakeRun(*s, p1);
  // c is admitted once a batch has room for its adapter, i.e. after a's and b's requests finish.
  bool c_admitted_alongside_b = false;
  while (!s->idle()) {
    StepPlan p = s->PlanStep();
    if (ExtendOf(p, c) > 0) {
      c_admitted_alongside_b = std::any_of(s->running().begin(), s->running().end(),
                                           [&](const Sequence* r) { return r == b; });
    }
    FakeRun(*s, p);
  }
  EXPECT_FALSE(c_admitted_alongside_b);
  EXPECT_TRUE(memory->CheckIdle().ok()) << memory->CheckIdle().message();
}

}  // namespace
}  // namespace radixserve::sched

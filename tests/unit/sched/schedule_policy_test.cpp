// Waiting-queue order of each policy.
#include "sched/schedule_policy.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "sched_test_util.h"

namespace radixserve::sched {
namespace {

using testing::FakeRun;
using testing::MakeMemory;
using testing::MakeSeq;

std::vector<uint64_t> Ids(const std::vector<Sequence*>& seqs) {
  std::vector<uint64_t> ids;
  for (const Sequence* s : seqs) ids.push_back(s->id);
  return ids;
}

struct Queue {
  std::vector<std::unique_ptr<Sequence>> owned;
  std::vector<Sequence*> waiting;
  Sequence* Push(std::unique_ptr<Sequence> seq) {
    seq->queue_order = owned.size();
    waiting.push_back(seq.get());
    owned.push_back(std::move(seq));
    return waiting.back();
  }
};

TEST(SchedulePolicyTest, FcfsKeepsArrivalOrderOrSortsByPriority) {
  auto memory = MakeMemory(1024);
  SchedulerConfig config;
  PolicyContext context{&config, &memory->cache(), 1};
  Queue q;
  for (uint64_t i = 1; i <= 4; ++i)
    q.Push(MakeSeq(i, 4, 4))->priority = static_cast<int64_t>(i % 2);
  FcfsPolicy fcfs;
  fcfs.Order(q.waiting, context);
  EXPECT_EQ(Ids(q.waiting), (std::vector<uint64_t>{1, 2, 3, 4}));
  config.enable_priority_scheduling = true;
  fcfs.Order(q.waiting, context);
  EXPECT_EQ(Ids(q.waiting), (std::vector<uint64_t>{1, 3, 2, 4}));
  config.schedule_low_priority_values_first = true;
  fcfs.Order(q.waiting, context);
  EXPECT_EQ(Ids(q.waiting), (std::vector<uint64_t>{2, 4, 1, 3}));
}

TEST(SchedulePolicyTest, LofLongestOutputFirst) {
  auto memory = MakeMemory(1024);
  SchedulerConfig config;
  PolicyContext context{&config, &memory->cache(), 1};
  Queue q;
  q.Push(MakeSeq(1, 4, 10));
  q.Push(MakeSeq(2, 4, 30));
  q.Push(MakeSeq(3, 4, 20));
  q.Push(MakeSeq(4, 4, 30));
  LofPolicy().Order(q.waiting, context);
  EXPECT_EQ(Ids(q.waiting), (std::vector<uint64_t>{2, 4, 3, 1}));
}

TEST(SchedulePolicyTest, RandomIsAPermutationReproducibleBySeed) {
  auto memory = MakeMemory(1024);
  SchedulerConfig config;
  PolicyContext context{&config, &memory->cache(), 1};
  Queue q1, q2;
  for (uint64_t i = 1; i <= 16; ++i) {
    q1.Push(MakeSeq(i, 4, 4));
    q2.Push(MakeSeq(i, 4, 4));
  }
  RandomPolicy(5).Order(q1.waiting, context);
  RandomPolicy(5).Order(q2.waiting, context);
  EXPECT_EQ(Ids(q1.waiting), Ids(q2.waiting));
  std::vector<uint64_t> sorted = Ids(q1.waiting);
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 1; i <= 16; ++i) EXPECT_EQ(sorted[i - 1], i);
}

// Caches a 64-token prompt starting at `base` by running it through a scheduler.
void CachePrompt(kv::KvMemory& memory, int32_t base, size_t len) {
  auto s = Scheduler::Create(SchedulerConfig{}, &memory).value();
  testing::Add(*s, MakeSeq(99, len, 1, base));
  while (!s->idle()) FakeRun(*s, s->PlanStep());
}

TEST(SchedulePolicyTest, LpmLongestCachedPrefixFirstWithInBatchDeprioritization) {
  auto memory = MakeMemory(4096);
  CachePrompt(*memory, 1000, 64);
  SchedulerConfig config;
  PolicyContext context{&config, &memory->cache(), 1};
  Queue q;
  q.Push(MakeSeq(1, 40, 4, 7000));  // no match; first of its kind: kept
  q.Push(MakeSeq(2, 50, 4, 1000));  // 49 cached
  q.Push(MakeSeq(3, 40, 4, 7000));  // shares 40 > 32 tokens with request 1 in this batch: last
  q.Push(MakeSeq(4, 20, 4, 1000));  // 19 cached
  LpmPolicy().Order(q.waiting, context);
  EXPECT_EQ(Ids(q.waiting), (std::vector<uint64_t>{2, 4, 1, 3}));
  EXPECT_EQ(q.waiting[0]->sort_prefix_len, 49u);
}

TEST(SchedulePolicyTest, LpmFallsBackToFcfsAbove128Waiting) {
  auto memory = MakeMemory(4096);
  CachePrompt(*memory, 1000, 64);
  SchedulerConfig config;
  PolicyContext context{&config, &memory->cache(), 1};
  Queue q;
  for (uint64_t i = 0; i < 129; ++i)
    q.Push(MakeSeq(i, 8, 4, i == 128 ? 1000 : 20000 + 100 * static_cast<int32_t>(i)));
  LpmPolicy().Order(q.waiting, context);
  EXPECT_EQ(q.waiting.back()->id, 128u);  // would be first under lpm
}

TEST(SchedulePolicyTest, DfsWeightVisitsHeaviestSubtreeFirst) {
  auto memory = MakeMemory(4096);
  CachePrompt(*memory, 1000, 32);  // branch A
  CachePrompt(*memory, 5000, 32);  // branch B
  SchedulerConfig config;
  PolicyContext context{&config, &memory->cache(), 1};
  Queue q;
  q.Push(MakeSeq(1, 40, 4, 1000));  // under A
  q.Push(MakeSeq(2, 40, 4, 5000));  // under B
  q.Push(MakeSeq(3, 40, 4, 5000));  // under B
  q.Push(MakeSeq(4, 8, 4, 9000));   // root
  DfsWeightPolicy().Order(q.waiting, context);
  EXPECT_EQ(Ids(q.waiting), (std::vector<uint64_t>{2, 3, 1, 4}));
}

TEST(SchedulePolicyTest, UnknownPolicyAndCacheAwareFallback) {
  EXPECT_FALSE(MakeSchedulePolicy("priority", false, 0).ok());
  EXPECT_EQ(MakeSchedulePolicy("lpm", /*cache_disabled=*/true, 0).value()->name(), "fcfs");
  EXPECT_EQ(MakeSchedulePolicy("dfs-weight", false, 0).value()->name(), "dfs-weight");
}

}  // namespace
}  // namespace radixserve::sched

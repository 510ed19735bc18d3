#include "kv/memory_sizing.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace radixserve::kv {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;

constexpr const char* kMeminfo =
    "MemTotal:       24000000 kB\n"
    "MemFree:         1000000 kB\n"
    "MemAvailable:   20000000 kB\n"
    "Buffers:           12345 kB\n";

TEST(MemorySizingTest, ParsesMeminfo) {
  Expected<HostMemory> memory = ParseHostMemory(kMeminfo, "", "", 1);
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ(memory->total_bytes, 24000000ull * 1024);
  EXPECT_EQ(memory->available_bytes, 20000000ull * 1024);
  EXPECT_EQ(memory->numa_nodes, 1);
}

TEST(MemorySizingTest, CgroupLimitCapsTotalAndAvailable) {
  Expected<HostMemory> memory = ParseHostMemory(kMeminfo, "8589934592\n", "1073741824\n", 1);
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ(memory->total_bytes, 8 * kGiB);
  EXPECT_EQ(memory->available_bytes, 7 * kGiB);
  // v2 "max" and v1's huge sentinel both mean no limit.
  EXPECT_EQ(ParseHostMemory(kMeminfo, "max\n", "5", 1)->total_bytes, 24000000ull * 1024);
  EXPECT_FALSE(ParseCgroupBytes("9223372036854771712").has_value());
  EXPECT_EQ(ParseCgroupBytes(" 4096\n").value(), 4096u);
}

TEST(MemorySizingTest, FallsBackToMemFreeAndRejectsGarbage) {
  Expected<HostMemory> memory = ParseHostMemory("MemTotal: 1000 kB\nMemFree: 600 kB\n", "", "", 2);
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ(memory->available_bytes, 600u * 1024);
  EXPECT_EQ(memory->numa_nodes, 2);
  EXPECT_FALSE(ParseHostMemory("nothing here\n", "", "", 1).ok());
}

TEST(MemorySizingTest, ReadsThisMachine) {
  Expected<HostMemory> memory = ReadHostMemory();
  ASSERT_TRUE(memory.ok()) << memory.status().message();
  EXPECT_GT(memory->total_bytes, 0u);
  EXPECT_LE(memory->available_bytes, memory->total_bytes);
  EXPECT_GE(memory->numa_nodes, 1);
}

KvSizingInput BaseInput() {
  KvSizingInput input;
  input.kv_bytes_per_token = kMiB;
  input.memory = HostMemory{32 * kGiB, 16 * kGiB, 2};
  input.weights_bytes = 1 * kGiB;
  input.page_size = 16;
  return input;
}

TEST(MemorySizingTest, DefaultFractionLeavesRoomForOthers) {
  // A = 16 GiB / 2 NUMA nodes = 8 GiB; 0.25 of it is 2 GiB of static memory; minus 1 GiB of
  // weights leaves 1 GiB of KV = 1024 tokens of 1 MiB.
  Expected<KvSizing> sizing = ComputeKvSizing(BaseInput());
  ASSERT_TRUE(sizing.ok());
  EXPECT_DOUBLE_EQ(sizing->mem_fraction_static, kCpuDefaultMemFractionStatic);
  EXPECT_EQ(sizing->available_bytes, 8 * kGiB);
  EXPECT_EQ(sizing->kv_budget_bytes, 1 * kGiB);
  EXPECT_EQ(sizing->max_total_num_tokens, 1024u);
}

TEST(MemorySizingTest, ExplicitFractionAndUserCap) {
  KvSizingInput input = BaseInput();
  input.mem_fraction_static = 0.5;  // 4 GiB static - 1 GiB weights = 3072 tokens
  EXPECT_EQ(ComputeKvSizing(input)->max_total_num_tokens, 3072u);
  input.max_total_tokens = 1000;  // lowers it, then rounds down to a page multiple
  Expected<KvSizing> capped = ComputeKvSizing(input);
  EXPECT_EQ(capped->max_total_num_tokens, 992u);
  EXPECT_EQ(capped->profiled_tokens, 3072u);
  input.max_total_tokens = 100000;  // cannot raise it
  EXPECT_EQ(ComputeKvSizing(input)->max_total_num_tokens, 3072u);
}

TEST(MemorySizingTest, DataParallelReplicasSplitTheKvBudget) {
  KvSizingInput input = BaseInput();
  input.mem_fraction_static = 0.5;  // 3 GiB of KV once the weights (shared) are paid for
  input.replicas = 3;               // 1 GiB each
  Expected<KvSizing> sizing = ComputeKvSizing(input);
  ASSERT_TRUE(sizing.ok());
  EXPECT_EQ(sizing->kv_budget_bytes, 1 * kGiB);
  EXPECT_EQ(sizing->max_total_num_tokens, 1024u);
}

TEST(MemorySizingTest, ErrorsAreValues) {
  KvSizingInput input = BaseInput();
  input.weights_bytes = 3 * kGiB;  // more than the static budget
  Expected<KvSizing> none = ComputeKvSizing(input);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(none.status().message(),
            "Not enough memory. Please try to increase --mem-fraction-static.");
  input = BaseInput();
  input.mem_fraction_static = 1.5;
  EXPECT_EQ(ComputeKvSizing(input).status().code(), StatusCode::kInvalidArgument);
  input = BaseInput();
  input.max_total_tokens = 0;
  EXPECT_EQ(ComputeKvSizing(input).status().code(), StatusCode::kInvalidArgument);
}

TEST(MemorySizingTest, StartupReadingStaysWhileMemoryIsTaken) {
  // The first reading is the one every later call returns, however much memory the process takes
  // meanwhile (as loading the weights does before the KV pool is sized).
  auto first = StartupHostMemory();
  ASSERT_TRUE(first.ok()) << first.status().message();
  std::vector<uint8_t> taken(size_t{256} << 20, 1);  // 256 MB, touched
  auto later = StartupHostMemory();
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->available_bytes, first->available_bytes);
  EXPECT_EQ(later->total_bytes, first->total_bytes);
  EXPECT_EQ(taken.back(), 1);
}

}  // namespace
}  // namespace radixserve::kv

#include "kv/kv_memory.h"

#include <vector>

#include <gtest/gtest.h>

#include "kv/chunk_cache.h"
#include "kv_test_util.h"

namespace radixserve::kv {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

KvMemoryOptions SmallModel() {
  KvMemoryOptions options;
  options.num_layers = 2;
  options.kv_heads = 2;
  options.head_dim = 8;  // 2 layers * 2 (K,V) * 2 heads * 8 dims * 4 bytes = 256 bytes/token
  options.context_len = 512;
  options.memory = HostMemory{16 * kGiB, 8 * kGiB, 1};
  return options;
}

TEST(KvMemoryTest, SizesFromMemoryWithSglangRequestPoolRule) {
  KvMemoryOptions options = SmallModel();
  options.mem_fraction_static = 1.0 / 8192;  // 1 MiB of 8 GiB -> 4096 tokens of 256 bytes
  Expected<std::unique_ptr<KvMemory>> memory = KvMemory::Create(options);
  ASSERT_TRUE(memory.ok()) << memory.status().message();
  EXPECT_EQ((*memory)->max_total_num_tokens(), 4096u);
  // rows = clamp(4096 / 512 * 512, 2048, 4096) = 4096; running = min(4096 / 2, 4096) = 2048.
  EXPECT_EQ((*memory)->req_pool().size(), 4096u);
  EXPECT_EQ((*memory)->req_pool().row_len(), 516u);
  EXPECT_EQ((*memory)->max_running_requests(), 2048);
  EXPECT_NE((*memory)->radix_cache(), nullptr);
  EXPECT_FALSE((*memory)->cache().disabled());
  EXPECT_EQ((*memory)->pool().storage().layer(1).num_rows, 4097u);
}

TEST(KvMemoryTest, Fp8HoldsTwiceTheTokensOfFp16InTheSameMemory) {
  // 2 layers * 2 (K,V) * 2 heads * 8 dims: 64 bytes/token in fp16, 32 in fp8, with the same
  // static memory budget.
  size_t tokens[2] = {};
  int i = 0;
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kFp8E4M3}) {
    KvMemoryOptions options = SmallModel();
    options.dtype = dtype;
    options.mem_fraction_static = 1.0 / 8192;
    Expected<std::unique_ptr<KvMemory>> memory = KvMemory::Create(options);
    ASSERT_TRUE(memory.ok()) << memory.status().message();
    tokens[i++] = (*memory)->max_total_num_tokens();
    EXPECT_EQ((*memory)->pool().storage().layer(0).element_size, KvDtypeSize(dtype));
  }
  EXPECT_GT(tokens[0], 1000u);
  EXPECT_EQ(tokens[1], 2 * tokens[0]);
}

TEST(KvMemoryTest, UserLimitsAndChunkCache) {
  KvMemoryOptions options = SmallModel();
  options.max_total_tokens = 1000;
  options.page_size = 16;
  options.max_running_requests = 8;
  options.disable_radix_cache = true;
  Expected<std::unique_ptr<KvMemory>> memory = KvMemory::Create(options);
  ASSERT_TRUE(memory.ok()) << memory.status().message();
  EXPECT_EQ((*memory)->max_total_num_tokens(), 992u);
  EXPECT_EQ((*memory)->req_pool().size(), 8u);
  EXPECT_EQ((*memory)->max_running_requests(), 8);
  EXPECT_EQ((*memory)->radix_cache(), nullptr);
  EXPECT_TRUE((*memory)->cache().disabled());
}

TEST(KvMemoryTest, RejectsBadOptions) {
  KvMemoryOptions options = SmallModel();
  options.context_len = 0;
  EXPECT_EQ(KvMemory::Create(options).status().code(), StatusCode::kInvalidArgument);
  options = SmallModel();
  options.max_running_requests = 0;
  EXPECT_EQ(KvMemory::Create(options).status().code(), StatusCode::kInvalidArgument);
  options = SmallModel();
  options.weights_bytes = 8 * kGiB;
  EXPECT_EQ(KvMemory::Create(options).status().code(), StatusCode::kResourceExhausted);
}

TEST(KvMemoryTest, AllocEvictsUnlockedCacheAndReportsUsage) {
  KvMemoryOptions options = SmallModel();
  options.max_total_tokens = 64;
  options.page_size = 4;
  Expected<std::unique_ptr<KvMemory>> created = KvMemory::Create(options);
  ASSERT_TRUE(created.ok());
  KvMemory& memory = **created;

  // Fill the cache with 48 finished tokens, keep 8 locked by a live sequence.
  const std::vector<int32_t> done = testing::Units({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 4);
  SeqKvState seq;
  ASSERT_TRUE(
      testing::Admit(memory.cache(), memory.pool(), memory.req_pool(), done, done.size(), &seq));
  memory.cache().CacheFinishedSeq(seq, CacheKey{done}, true);
  const std::vector<int32_t> live_tokens = testing::Units({1, 2, 99}, 4);
  SeqKvState live;
  ASSERT_TRUE(testing::Admit(memory.cache(), memory.pool(), memory.req_pool(), live_tokens,
                             live_tokens.size(), &live));
  EXPECT_EQ(live.cache_protected_len, 8u);
  EXPECT_EQ(memory.pool().available_size(), 12u);
  EXPECT_EQ(memory.used_tokens(), 12u);  // 8 locked + 4 owned by the live sequence
  EXPECT_DOUBLE_EQ(memory.token_usage(), 12.0 / 64);
  EXPECT_EQ(memory.allocatable_tokens(), 52u);

  // 40 more tokens need 28 from the cache; the locked prefix survives.
  const ExtendSpec big{0, 40, -1};
  Expected<std::vector<int32_t>> slots = memory.AllocExtendEvicting({&big, 1});
  ASSERT_TRUE(slots.ok()) << slots.status().message();
  const ExtendSpec too_big{0, 64, -1};
  Expected<std::vector<int32_t>> none = memory.AllocExtendEvicting({&too_big, 1});
  EXPECT_EQ(none.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(memory.cache().ProtectedSize(), 8u);

  EXPECT_FALSE(memory.Flush().ok());  // a request still holds memory
  memory.pool().Free(*slots);
  memory.cache().CacheFinishedSeq(live, CacheKey{live_tokens}, true);
  Status idle = memory.CheckIdle();
  EXPECT_TRUE(idle.ok()) << idle.message();
  ASSERT_TRUE(memory.Flush().ok());
  EXPECT_EQ(memory.pool().available_size(), 64u);
  EXPECT_EQ(memory.cache().TotalSize(), 0u);
  EXPECT_TRUE(memory.CheckIdle().ok());
}

}  // namespace
}  // namespace radixserve::kv

#include "kv/chunk_cache.h"

#include <vector>

#include <gtest/gtest.h>

#include "kv/leak_check.h"
#include "kv_test_util.h"

namespace radixserve::kv {
namespace {

using testing::Admit;
using testing::Extend;
using testing::Slice;

class ChunkCacheTest : public ::testing::TestWithParam<int32_t> {
 protected:
  ChunkCacheTest()
      : page_(GetParam()),
        pool_(testing::MakePool(32 * static_cast<size_t>(GetParam()), GetParam())),
        req_pool_(4, 32 * static_cast<size_t>(GetParam()) + 4),
        cache_(&pool_, &req_pool_) {}

  const int32_t page_;
  TokenToKVPool pool_;
  ReqToTokenPool req_pool_;
  ChunkCache cache_;
};

TEST_P(ChunkCacheTest, NeverSharesAndNeverHoldsAnything) {
  const std::vector<int32_t> tokens = testing::Units({1, 2, 3}, page_);
  SeqKvState first;
  ASSERT_TRUE(Admit(cache_, pool_, req_pool_, tokens, tokens.size(), &first));
  cache_.CacheFinishedSeq(first, CacheKey{tokens}, true);
  EXPECT_EQ(pool_.available_size(), pool_.size());
  EXPECT_EQ(first.req_pool_slot, -1);

  MatchResult match = cache_.MatchPrefix(CacheKey{tokens});
  EXPECT_EQ(match.matched_len(), 0u);
  EXPECT_EQ(match.last_node, nullptr);
  EXPECT_TRUE(cache_.disabled());
  EXPECT_EQ(cache_.Evict(100), 0u);
  EXPECT_EQ(cache_.TotalSize(), 0u);
  EXPECT_TRUE(cache_.Reset().ok());
  EXPECT_TRUE(CheckKvLeak(pool_, cache_, &req_pool_).ok());
}

TEST_P(ChunkCacheTest, KeepsOwnKvBetweenChunks) {
  const std::vector<int32_t> tokens = testing::Units({1, 2, 3, 4}, page_);
  const size_t c1 = page_ + page_ / 2;
  SeqKvState seq;
  ASSERT_TRUE(Admit(cache_, pool_, req_pool_, tokens, c1, &seq));
  cache_.CacheUnfinishedSeq(seq, CacheKey{std::span(tokens).first(c1)});
  EXPECT_EQ(seq.prefix_indices, Slice(req_pool_.Row(seq.req_pool_slot), 0, c1));
  EXPECT_EQ(seq.cache_protected_len, 0u);
  EXPECT_EQ(cache_.TotalSize(), 0u);

  ASSERT_TRUE(Extend(pool_, req_pool_, seq, c1, tokens.size()));
  EXPECT_EQ(pool_.used_size(), tokens.size());
  cache_.CacheFinishedSeq(seq, CacheKey{tokens}, true);
  EXPECT_EQ(pool_.available_size(), pool_.size());
  EXPECT_TRUE(CheckKvLeak(pool_, cache_, &req_pool_).ok());
}

INSTANTIATE_TEST_SUITE_P(PageSizes, ChunkCacheTest, ::testing::Values(1, 16),
                         [](const ::testing::TestParamInfo<int32_t>& info) {
                           return "page" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace radixserve::kv

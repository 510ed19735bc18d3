#include "kv/radix_cache.h"

#include <vector>

#include <gtest/gtest.h>

#include "kv/leak_check.h"
#include "kv_test_util.h"

namespace radixserve::kv {
namespace {

using testing::Admit;
using testing::Extend;
using testing::Slice;

class RadixCacheTest : public ::testing::TestWithParam<int32_t> {
 protected:
  RadixCacheTest()
      : page_(GetParam()),
        pool_(testing::MakePool(64 * static_cast<size_t>(GetParam()), GetParam())),
        req_pool_(8, 64 * static_cast<size_t>(GetParam()) + 4),
        cache_(&pool_, &req_pool_, RadixCacheOptions{GetParam(), EvictionPolicy::kLru}) {}

  std::vector<int32_t> Units(const std::vector<int32_t>& units) const {
    return testing::Units(units, page_);
  }
  std::vector<int32_t> Alloc(size_t units) {
    Expected<std::vector<int32_t>> slots = pool_.Alloc(units * page_);
    RADIX_CHECK(slots.ok());
    return std::move(slots).value();
  }
  // Inserts a fresh sequence whose slots the cache then owns (nothing was cached before).
  std::vector<int32_t> InsertNew(const std::vector<int32_t>& units) {
    std::vector<int32_t> slots = Alloc(units.size());
    const std::vector<int32_t> key = Units(units);
    EXPECT_EQ(cache_.Insert(CacheKey{key}, slots), 0u);
    return slots;
  }
  size_t Matched(const std::vector<int32_t>& units) {
    const std::vector<int32_t> key = Units(units);
    return cache_.MatchPrefix(CacheKey{key}).matched_len();
  }
  void ExpectHealthy() {
    Status invariants = cache_.CheckInvariants();
    EXPECT_TRUE(invariants.ok()) << invariants.message();
  }

  const int32_t page_;
  TokenToKVPool pool_;
  ReqToTokenPool req_pool_;
  RadixCache cache_;
};

TEST_P(RadixCacheTest, MatchInsertAndSplit) {
  const std::vector<int32_t> key = Units({1, 2, 3});
  MatchResult empty = cache_.MatchPrefix(CacheKey{key});
  EXPECT_EQ(empty.matched_len(), 0u);
  EXPECT_EQ(empty.last_node, cache_.root());

  const std::vector<int32_t> slots = InsertNew({1, 2, 3});
  EXPECT_EQ(cache_.EvictableSize(), 3u * page_);
  EXPECT_EQ(cache_.ProtectedSize(), 0u);
  EXPECT_EQ(cache_.node_count(), 2u);

  const std::vector<int32_t> longer = Units({1, 2, 3, 4});
  MatchResult full = cache_.MatchPrefix(CacheKey{longer});
  EXPECT_EQ(full.device_indices, slots);

  // Matching a shorter prefix splits the node at the page boundary.
  const std::vector<int32_t> shorter = Units({1, 2});
  MatchResult part = cache_.MatchPrefix(CacheKey{shorter});
  EXPECT_EQ(part.device_indices, Slice(slots, 0, 2 * page_));
  EXPECT_EQ(part.last_node->key, shorter);
  EXPECT_EQ(cache_.node_count(), 3u);
  EXPECT_EQ(cache_.EvictableSize(), 3u * page_);
  EXPECT_EQ(Matched({9}), 0u);
  EXPECT_EQ(Matched({1, 2, 3}), 3u * page_);
  ExpectHealthy();
}

TEST_P(RadixCacheTest, MatchesWholePagesOnly) {
  const std::vector<int32_t> slots = InsertNew({1, 2});
  // The key stops half-way into the second page: only the first page can match.
  std::vector<int32_t> key = Units({1, 2});
  key.resize(page_ + page_ / 2);
  EXPECT_EQ(cache_.MatchPrefix(CacheKey{key}).matched_len(), static_cast<size_t>(page_));
  // A second page that differs in its last token does not match at all.
  key = Units({1, 2});
  key.back() = -7;
  MatchResult match = cache_.MatchPrefix(CacheKey{key});
  EXPECT_EQ(match.device_indices, Slice(slots, 0, page_));
  ExpectHealthy();
}

TEST_P(RadixCacheTest, InsertReturnsAlreadyCachedLength) {
  const std::vector<int32_t> first = InsertNew({1, 2});
  std::vector<int32_t> second = Alloc(4);
  const std::vector<int32_t> key = Units({1, 2, 3, 4});
  EXPECT_EQ(cache_.Insert(CacheKey{key}, second), 2u * page_);
  // The caller frees its duplicates of the cached prefix; the cache keeps the rest.
  pool_.Free(std::span(second).first(2 * page_));
  std::vector<int32_t> expected = first;
  expected.insert(expected.end(), second.begin() + 2 * page_, second.end());
  EXPECT_EQ(cache_.MatchPrefix(CacheKey{key}).device_indices, expected);
  EXPECT_EQ(cache_.EvictableSize(), 4u * page_);
  EXPECT_TRUE(CheckKvLeak(pool_, cache_).ok());
  ExpectHealthy();
}

TEST_P(RadixCacheTest, LongerSequenceSharingPrefixFreesDuplicates) {
  // Two sequences computed the same 2-unit prefix concurrently (neither found it cached).
  const std::vector<int32_t> a_tokens = Units({1, 2, 3});
  const std::vector<int32_t> b_tokens = Units({1, 2, 4, 5});
  SeqKvState a, b;
  ASSERT_TRUE(Admit(cache_, pool_, req_pool_, a_tokens, a_tokens.size(), &a));
  ASSERT_TRUE(Admit(cache_, pool_, req_pool_, b_tokens, b_tokens.size(), &b));
  EXPECT_EQ(pool_.used_size(), 7u * page_);

  cache_.CacheFinishedSeq(a, CacheKey{a_tokens}, /*insert=*/true);
  EXPECT_EQ(cache_.EvictableSize(), 3u * page_);
  EXPECT_EQ(a.req_pool_slot, -1);
  cache_.CacheFinishedSeq(b, CacheKey{b_tokens}, /*insert=*/true);
  // B's copy of the shared prefix went back to the pool; only 5 units stay cached.
  EXPECT_EQ(cache_.EvictableSize(), 5u * page_);
  EXPECT_EQ(pool_.used_size(), 5u * page_);
  Status leak = CheckKvLeak(pool_, cache_, &req_pool_);
  EXPECT_TRUE(leak.ok()) << leak.message();
  ExpectHealthy();
}

TEST_P(RadixCacheTest, UnalignedTailIsFreedOnFinish) {
  std::vector<int32_t> tokens = Units({1, 2});
  tokens.push_back(77);  // one token into a third page
  SeqKvState seq;
  ASSERT_TRUE(Admit(cache_, pool_, req_pool_, tokens, tokens.size(), &seq));
  cache_.CacheFinishedSeq(seq, CacheKey{tokens}, true);
  // Only whole pages are cached: with page 1 the extra token is a page of its own.
  const size_t cached = tokens.size() / page_ * page_;
  EXPECT_EQ(cache_.EvictableSize(), cached);
  EXPECT_EQ(pool_.used_size(), cached);
  EXPECT_TRUE(CheckKvLeak(pool_, cache_, &req_pool_).ok());
}

TEST_P(RadixCacheTest, EvictsLeastRecentlyUsedFirst) {
  InsertNew({1, 1});
  InsertNew({2, 2});
  InsertNew({3, 3});
  EXPECT_EQ(Matched({1, 1}), 2u * page_);  // 1 is now the most recent; 2 the oldest
  EXPECT_EQ(cache_.Evict(1), 2u * page_);
  EXPECT_EQ(Matched({2, 2}), 0u);
  EXPECT_EQ(Matched({1, 1}), 2u * page_);
  EXPECT_EQ(Matched({3, 3}), 2u * page_);
  EXPECT_EQ(Matched({1, 1}), 2u * page_);
  EXPECT_EQ(cache_.Evict(1), 2u * page_);  // 3 is older than 1 now
  EXPECT_EQ(Matched({3, 3}), 0u);
  EXPECT_EQ(Matched({1, 1}), 2u * page_);
  EXPECT_EQ(pool_.available_size(), pool_.size() - 2u * page_);
  ExpectHealthy();
}

TEST_P(RadixCacheTest, EvictionFreesAtLeastTheRequestedAmount) {
  InsertNew({1, 1, 1});
  InsertNew({2});
  InsertNew({3, 3});
  // Evicting more than one leaf holds: leaves go oldest first until enough is freed.
  EXPECT_EQ(cache_.Evict(3u * page_ + 1), 4u * page_);
  EXPECT_EQ(Matched({3, 3}), 2u * page_);
  EXPECT_EQ(cache_.Evict(1000u * page_), 2u * page_);
  EXPECT_EQ(cache_.TotalSize(), 0u);
  EXPECT_EQ(pool_.available_size(), pool_.size());
}

TEST_P(RadixCacheTest, EvictionCascadesToEmptiedParents) {
  InsertNew({1, 2});
  std::vector<int32_t> other = Alloc(2);
  const std::vector<int32_t> key = Units({1, 3});
  ASSERT_EQ(cache_.Insert(CacheKey{key}, other), static_cast<size_t>(page_));
  pool_.Free(std::span(other).first(page_));
  EXPECT_EQ(cache_.node_count(), 4u);  // root, [1], [2], [3]
  EXPECT_EQ(cache_.Evict(3u * page_), 3u * page_);
  EXPECT_EQ(cache_.node_count(), 1u);
  EXPECT_EQ(pool_.available_size(), pool_.size());
}

TEST_P(RadixCacheTest, LockProtectsFromEviction) {
  InsertNew({1, 2});
  InsertNew({5});
  const std::vector<int32_t> key = Units({1, 2});
  MatchResult match = cache_.MatchPrefix(CacheKey{key});
  cache_.IncLockRef(match.last_node);
  EXPECT_EQ(cache_.ProtectedSize(), 2u * page_);
  EXPECT_EQ(cache_.EvictableSize(), 1u * page_);
  EXPECT_EQ(cache_.Evict(100u * page_), 1u * page_);
  EXPECT_EQ(Matched({1, 2}), 2u * page_);
  ExpectHealthy();

  // A second lock on the same path needs two unlocks.
  cache_.IncLockRef(match.last_node);
  cache_.DecLockRef(match.last_node);
  EXPECT_EQ(cache_.Evict(100u * page_), 0u);
  cache_.DecLockRef(match.last_node);
  EXPECT_EQ(cache_.EvictableSize(), 2u * page_);
  EXPECT_EQ(cache_.Evict(100u * page_), 2u * page_);
  ExpectHealthy();
}

TEST_P(RadixCacheTest, SplitKeepsLocks) {
  InsertNew({1, 2, 3, 4});
  const std::vector<int32_t> key = Units({1, 2, 3, 4});
  MatchResult match = cache_.MatchPrefix(CacheKey{key});
  cache_.IncLockRef(match.last_node);
  EXPECT_EQ(Matched({1, 2}), 2u * page_);  // splits the locked node
  EXPECT_EQ(cache_.ProtectedSize(), 4u * page_);
  ExpectHealthy();
  // A new branch off the locked path is evictable on its own.
  std::vector<int32_t> branch = Alloc(3);
  const std::vector<int32_t> branch_key = Units({1, 2, 7});
  ASSERT_EQ(cache_.Insert(CacheKey{branch_key}, branch), 2u * page_);
  pool_.Free(std::span(branch).first(2 * page_));
  EXPECT_EQ(cache_.EvictableSize(), 1u * page_);
  EXPECT_EQ(cache_.Evict(100u * page_), 1u * page_);
  EXPECT_EQ(Matched({1, 2, 3, 4}), 4u * page_);
  cache_.DecLockRef(match.last_node);
  EXPECT_EQ(cache_.EvictableSize(), 4u * page_);
  EXPECT_EQ(cache_.ProtectedSize(), 0u);
  ExpectHealthy();
}

TEST_P(RadixCacheTest, ExtraKeySeparatesNamespaces) {
  std::vector<int32_t> slots = Alloc(2);
  const std::vector<int32_t> key = Units({1, 2});
  EXPECT_EQ(cache_.Insert(CacheKey{key, "salt-a"}, slots), 0u);
  EXPECT_EQ(cache_.MatchPrefix(CacheKey{key}).matched_len(), 0u);
  EXPECT_EQ(cache_.MatchPrefix(CacheKey{key, "salt-b"}).matched_len(), 0u);
  EXPECT_EQ(cache_.MatchPrefix(CacheKey{key, "salt-a"}).device_indices, slots);
  ExpectHealthy();
}

TEST_P(RadixCacheTest, ResetOnlyWhenNothingIsLocked) {
  InsertNew({1, 2});
  InsertNew({3});
  const std::vector<int32_t> key = Units({3});
  MatchResult match = cache_.MatchPrefix(CacheKey{key});
  cache_.IncLockRef(match.last_node);
  Status busy = cache_.Reset();
  EXPECT_FALSE(busy.ok());
  EXPECT_EQ(cache_.TotalSize(), 3u * page_);
  cache_.DecLockRef(match.last_node);
  ASSERT_TRUE(cache_.Reset().ok());
  EXPECT_EQ(cache_.TotalSize(), 0u);
  EXPECT_EQ(cache_.node_count(), 1u);
  EXPECT_EQ(pool_.available_size(), pool_.size());
  EXPECT_EQ(Matched({1, 2}), 0u);
}

TEST_P(RadixCacheTest, ChunkedPrefillCachesBetweenChunks) {
  std::vector<int32_t> tokens = Units({1, 2, 3, 4});
  const size_t c1 = page_ + page_ / 2;  // ends inside the second page (page 16)
  const size_t c2 = 3 * page_ + page_ / 2;
  SeqKvState seq;
  ASSERT_TRUE(Admit(cache_, pool_, req_pool_, tokens, c1, &seq));
  cache_.CacheUnfinishedSeq(seq, CacheKey{std::span(tokens).first(c1)});
  EXPECT_EQ(seq.cache_protected_len, static_cast<size_t>(page_));
  EXPECT_EQ(seq.prefix_indices, Slice(req_pool_.Row(seq.req_pool_slot), 0, c1));
  EXPECT_EQ(cache_.ProtectedSize(), static_cast<size_t>(page_));
  EXPECT_EQ(cache_.EvictableSize(), 0u);

  ASSERT_TRUE(Extend(pool_, req_pool_, seq, c1, c2));
  cache_.CacheUnfinishedSeq(seq, CacheKey{std::span(tokens).first(c2)});
  EXPECT_EQ(seq.cache_protected_len, 3u * page_);
  EXPECT_EQ(cache_.ProtectedSize(), 3u * page_);
  EXPECT_EQ(seq.prefix_indices.size(), c2);

  ASSERT_TRUE(Extend(pool_, req_pool_, seq, c2, tokens.size()));
  cache_.CacheFinishedSeq(seq, CacheKey{tokens}, true);
  EXPECT_EQ(cache_.ProtectedSize(), 0u);
  EXPECT_EQ(cache_.EvictableSize(), 4u * page_);
  Status leak = CheckKvLeak(pool_, cache_, &req_pool_);
  EXPECT_TRUE(leak.ok()) << leak.message();
  ExpectHealthy();
}

TEST_P(RadixCacheTest, UnfinishedSeqAdoptsSlotsCachedByAnother) {
  const std::vector<int32_t> tokens = Units({1, 2, 3});
  SeqKvState a, b;
  ASSERT_TRUE(Admit(cache_, pool_, req_pool_, tokens, tokens.size(), &a));
  ASSERT_TRUE(Admit(cache_, pool_, req_pool_, tokens, 2 * page_, &b));
  const std::vector<int32_t> a_slots = Slice(req_pool_.Row(a.req_pool_slot), 0, tokens.size());
  cache_.CacheFinishedSeq(a, CacheKey{tokens}, true);
  cache_.CacheUnfinishedSeq(b, CacheKey{std::span(tokens).first(2 * page_)});
  // B's row now points at A's cached slots and its own copies were freed.
  EXPECT_EQ(Slice(req_pool_.Row(b.req_pool_slot), 0, 2 * page_), Slice(a_slots, 0, 2 * page_));
  EXPECT_EQ(pool_.used_size(), 3u * page_);
  EXPECT_EQ(cache_.ProtectedSize(), 2u * page_);
  cache_.CacheFinishedSeq(b, CacheKey{std::span(tokens).first(2 * page_)}, true);
  EXPECT_TRUE(CheckKvLeak(pool_, cache_, &req_pool_).ok());
  ExpectHealthy();
}

TEST_P(RadixCacheTest, RetractionFreesWithoutInserting) {
  const std::vector<int32_t> prompt = Units({1, 2});
  InsertNew({1, 2});
  std::vector<int32_t> tokens = Units({1, 2, 3, 4});
  SeqKvState seq;
  ASSERT_TRUE(Admit(cache_, pool_, req_pool_, tokens, tokens.size(), &seq));
  EXPECT_EQ(seq.cache_protected_len, 2u * page_);
  cache_.CacheFinishedSeq(seq, CacheKey{tokens}, /*insert=*/false);
  EXPECT_EQ(Matched({1, 2, 3, 4}), 2u * page_);  // only the previously cached prefix remains
  EXPECT_EQ(pool_.used_size(), 2u * page_);
  EXPECT_EQ(cache_.ProtectedSize(), 0u);
  EXPECT_TRUE(CheckKvLeak(pool_, cache_, &req_pool_).ok());
}

INSTANTIATE_TEST_SUITE_P(PageSizes, RadixCacheTest, ::testing::Values(1, 16),
                         [](const ::testing::TestParamInfo<int32_t>& info) {
                           return "page" + std::to_string(info.param);
                         });

TEST(RadixCachePolicyTest, LfuEvictsTheLeastHitLeaf) {
  TokenToKVPool pool = testing::MakePool(16, 1);
  ReqToTokenPool req_pool(2, 20);
  RadixCache cache(&pool, &req_pool, RadixCacheOptions{1, EvictionPolicy::kLfu});
  const std::vector<int32_t> x{1, 2}, y{3, 4};
  ASSERT_EQ(cache.Insert(CacheKey{x}, pool.Alloc(2).value()), 0u);
  ASSERT_EQ(cache.Insert(CacheKey{y}, pool.Alloc(2).value()), 0u);
  cache.MatchPrefix(CacheKey{y});
  cache.MatchPrefix(CacheKey{y});
  cache.MatchPrefix(CacheKey{x});  // x is the most recent but has fewer hits
  EXPECT_EQ(cache.Evict(1), 2u);
  EXPECT_EQ(cache.MatchPrefix(CacheKey{x}).matched_len(), 0u);
  EXPECT_EQ(cache.MatchPrefix(CacheKey{y}).matched_len(), 2u);
}

TEST(RadixCachePolicyTest, ParsesPolicyNames) {
  EXPECT_EQ(ParseEvictionPolicy("lru").value(), EvictionPolicy::kLru);
  EXPECT_EQ(ParseEvictionPolicy("lfu").value(), EvictionPolicy::kLfu);
  EXPECT_EQ(ParseEvictionPolicy("fifo").value(), EvictionPolicy::kFifo);
  EXPECT_FALSE(ParseEvictionPolicy("random").ok());
}

TEST(PrefixCacheTest, NeverMatchesTheWholePrompt) {
  EXPECT_EQ(MaxPrefixMatchLen(10), 9u);
  EXPECT_EQ(MaxPrefixMatchLen(1), 0u);
  EXPECT_EQ(MaxPrefixMatchLen(10, 4), 4u);
  EXPECT_EQ(MaxPrefixMatchLen(10, 20), 9u);
}

TEST(RadixCacheTokenOnlyTest, WorksWithoutAPool) {
  // The scheduler's simulated tree for in-batch prefix caching: values are placeholders.
  RadixCache tree(nullptr, nullptr, RadixCacheOptions{});
  const std::vector<int32_t> a{1, 2, 3, 4}, b{1, 2, 9};
  const std::vector<int32_t> dummy(4, 0);
  EXPECT_EQ(tree.Insert(CacheKey{a}, dummy), 0u);
  EXPECT_EQ(tree.MatchPrefix(CacheKey{b}).matched_len(), 2u);
  EXPECT_EQ(tree.Evict(100), 4u);
}

}  // namespace
}  // namespace radixserve::kv

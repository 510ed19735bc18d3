// Randomized property test: sequences are admitted, extended in chunks, finished or retracted,
// the cache is evicted and probed, in random order. A plain map model (page-aligned prefix ->
// slots of its last page) predicts every match; after each step the tree invariants, the lock
// accounting and the slot accounting (free + cached + owned by live sequences == total) hold.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "kv/leak_check.h"
#include "kv/radix_cache.h"
#include "kv_test_util.h"

namespace radixserve::kv {
namespace {

using Tokens = std::vector<int32_t>;

// How much of the interesting behaviour a run exercised.
struct RunStats {
  size_t shared_matches = 0;  // matches that found a cached prefix
  size_t chunks = 0;          // CacheUnfinishedSeq calls
  size_t evicted_tokens = 0;
  size_t out_of_memory = 0;  // allocations that needed eviction first
  size_t splits = 0;         // matches that split a node
};

struct LiveSeq {
  Tokens tokens;
  size_t computed = 0;
  SeqKvState state;
};

class RadixCacheModelRun {
 public:
  RadixCacheModelRun(int32_t page, uint32_t seed)
      : page_(page),
        rng_(seed),
        pool_(testing::MakePool(14 * static_cast<size_t>(page), page)),
        req_pool_(6, 8 * static_cast<size_t>(page)),
        cache_(&pool_, &req_pool_, RadixCacheOptions{page, EvictionPolicy::kLru}) {
    for (int b = 0; b < 3; ++b) {
      Tokens base;
      for (int i = 0; i < 4 * page; ++i) base.push_back(Uniform(0, 49));
      bases_.push_back(base);
    }
  }

  const RunStats& stats() const { return stats_; }

  void Run(int steps) {
    for (int step = 0; step < steps; ++step) {
      switch (Uniform(0, 9)) {
        case 0:
        case 1:
        case 2:
          Admit();
          break;
        case 3:
        case 4:
          Chunk();
          break;
        case 5:
        case 6:
          Finish();
          break;
        case 7:
          EvictSome();
          break;
        default:
          Probe();
          break;
      }
      CheckState();
      if (::testing::Test::HasFatalFailure() || ::testing::Test::HasNonfatalFailure()) {
        ADD_FAILURE() << "first failure at step " << step;
        return;
      }
    }
    while (!live_.empty()) FinishAt(0, true);
    Status leak = CheckKvLeak(pool_, cache_, &req_pool_);
    EXPECT_TRUE(leak.ok()) << leak.message();
    EXPECT_EQ(cache_.Evict(pool_.size()), model_.size() * page_);
    EXPECT_EQ(pool_.available_size(), pool_.size());
  }

 private:
  int32_t Uniform(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }
  size_t Align(size_t n) const { return n / page_ * page_; }

  Tokens RandomSequence() {
    const Tokens& base = bases_[Uniform(0, 2)];
    Tokens tokens(base.begin(), base.begin() + Uniform(0, static_cast<int32_t>(base.size())));
    const int32_t suffix = Uniform(1, 2 * page_);
    for (int32_t i = 0; i < suffix; ++i) tokens.push_back(Uniform(0, 2));
    return tokens;
  }

  // What the cache should return for key, according to the model.
  Tokens ModelMatch(std::span<const int32_t> key) const {
    Tokens slots;
    for (size_t k = page_; k <= key.size(); k += page_) {
      auto it = model_.find(Tokens(key.begin(), key.begin() + k));
      if (it == model_.end()) break;
      slots.insert(slots.end(), it->second.begin(), it->second.end());
    }
    return slots;
  }

  void ModelInsert(std::span<const int32_t> tokens, std::span<const int32_t> row) {
    for (size_t k = page_; k <= Align(tokens.size()); k += page_) {
      Tokens prefix(tokens.begin(), tokens.begin() + k);
      if (!model_.count(prefix)) model_[prefix] = Tokens(row.begin() + k - page_, row.begin() + k);
    }
  }

  bool WithEviction(const std::function<bool()>& attempt, size_t need) {
    if (attempt()) return true;
    ++stats_.out_of_memory;
    stats_.evicted_tokens += cache_.Evict(need);
    SyncModelAfterEviction();
    return attempt();
  }

  void Admit() {
    if (req_pool_.available_size() == 0) return;
    LiveSeq seq;
    seq.tokens = RandomSequence();
    std::span<const int32_t> key = std::span(seq.tokens).first(seq.tokens.size() - 1);
    const size_t nodes = cache_.node_count();
    const MatchResult match = cache_.MatchPrefix(CacheKey{key});
    EXPECT_EQ(match.device_indices, ModelMatch(key));
    if (match.matched_len() > 0) ++stats_.shared_matches;
    if (cache_.node_count() > nodes) ++stats_.splits;
    seq.computed = Uniform(1, static_cast<int32_t>(seq.tokens.size()));
    const bool ok = WithEviction(
        [&] {
          return testing::Admit(cache_, pool_, req_pool_, seq.tokens, seq.computed, &seq.state);
        },
        seq.tokens.size() + page_);
    if (!ok) return;
    seq.computed = std::max(seq.computed, seq.state.cache_protected_len);
    live_.push_back(std::move(seq));
  }

  void Chunk() {
    if (live_.empty()) return;
    LiveSeq& seq = live_[Uniform(0, static_cast<int32_t>(live_.size()) - 1)];
    if (seq.computed == seq.tokens.size()) return;
    const size_t target =
        Uniform(static_cast<int32_t>(seq.computed) + 1, static_cast<int32_t>(seq.tokens.size()));
    const bool ok = WithEviction(
        [&] { return testing::Extend(pool_, req_pool_, seq.state, seq.computed, target); },
        target - seq.computed + page_);
    if (!ok) return;
    seq.computed = target;
    ++stats_.chunks;
    ModelInsert(std::span(seq.tokens).first(target), req_pool_.Row(seq.state.req_pool_slot));
    cache_.CacheUnfinishedSeq(seq.state, CacheKey{std::span(seq.tokens).first(target)});
    EXPECT_EQ(seq.state.cache_protected_len, Align(target));
    EXPECT_EQ(seq.state.prefix_indices.size(), target);
    const std::span<const int32_t> row = req_pool_.Row(seq.state.req_pool_slot);
    EXPECT_EQ(Tokens(row.begin(), row.begin() + Align(target)),
              ModelMatch(std::span(seq.tokens).first(target)));
    EXPECT_TRUE(
        std::equal(seq.state.prefix_indices.begin(), seq.state.prefix_indices.end(), row.begin()));
  }

  void Finish() {
    if (live_.empty()) return;
    FinishAt(Uniform(0, static_cast<int32_t>(live_.size()) - 1), Uniform(0, 3) != 0);
  }

  void FinishAt(size_t index, bool insert) {
    LiveSeq seq = std::move(live_[index]);
    live_.erase(live_.begin() + static_cast<ptrdiff_t>(index));
    const std::span<const int32_t> done = std::span(seq.tokens).first(seq.computed);
    if (insert) ModelInsert(done, req_pool_.Row(seq.state.req_pool_slot));
    cache_.CacheFinishedSeq(seq.state, CacheKey{done}, insert);
    EXPECT_EQ(seq.state.req_pool_slot, -1);
  }

  void EvictSome() {
    const size_t request = Uniform(0, 6 * page_);
    const size_t evictable = cache_.EvictableSize();
    const size_t freed = cache_.Evict(request);
    stats_.evicted_tokens += freed;
    EXPECT_EQ(freed, evictable - cache_.EvictableSize());
    if (request <= evictable) {
      EXPECT_GE(freed, request);
    } else {
      EXPECT_EQ(freed, evictable);
    }
    SyncModelAfterEviction();
  }

  // Drops evicted prefixes from the model, checking that eviction only removed whole subtrees
  // and never changed a surviving entry.
  void SyncModelAfterEviction() {
    std::set<Tokens> removed;
    for (auto it = model_.begin(); it != model_.end();) {
      const MatchResult match = cache_.MatchPrefix(CacheKey{it->first});
      if (match.matched_len() == it->first.size()) {
        EXPECT_EQ(Tokens(match.device_indices.end() - page_, match.device_indices.end()),
                  it->second);
        ++it;
      } else {
        removed.insert(it->first);
        it = model_.erase(it);
      }
    }
    for (const auto& [prefix, unused] : model_) {
      for (const Tokens& gone : removed) {
        EXPECT_FALSE(gone.size() < prefix.size() &&
                     std::equal(gone.begin(), gone.end(), prefix.begin()))
            << "an entry survived the eviction of its prefix";
      }
    }
  }

  void Probe() {
    const Tokens key = RandomSequence();
    EXPECT_EQ(cache_.MatchPrefix(CacheKey{key}).device_indices, ModelMatch(key));
  }

  void CheckState() {
    Status invariants = cache_.CheckInvariants();
    ASSERT_TRUE(invariants.ok()) << invariants.message();
    ASSERT_EQ(cache_.TotalSize(), model_.size() * page_);

    std::set<Tokens> locked;
    size_t owned = 0;
    for (const LiveSeq& seq : live_) {
      const size_t protected_len = seq.state.cache_protected_len;
      for (size_t k = page_; k <= protected_len; k += page_) {
        const Tokens prefix(seq.tokens.begin(), seq.tokens.begin() + k);
        ASSERT_TRUE(model_.count(prefix)) << "a locked prefix is missing from the cache";
        locked.insert(prefix);
      }
      const size_t owned_pages = (seq.computed + page_ - 1) / page_ - protected_len / page_;
      owned += owned_pages * page_;
    }
    ASSERT_EQ(cache_.ProtectedSize(), locked.size() * page_);
    ASSERT_EQ(pool_.available_size() + cache_.TotalSize() + owned, pool_.size());
  }

  const int32_t page_;
  std::mt19937 rng_;
  TokenToKVPool pool_;
  ReqToTokenPool req_pool_;
  RadixCache cache_;
  std::vector<Tokens> bases_;
  std::vector<LiveSeq> live_;
  std::map<Tokens, Tokens> model_;
  RunStats stats_;
};

class RadixCachePropertyTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(RadixCachePropertyTest, MatchesModelUnderRandomOperations) {
  RunStats total;
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RadixCacheModelRun run(GetParam(), seed);
    run.Run(1500);
    if (HasFailure()) return;
    total.shared_matches += run.stats().shared_matches;
    total.chunks += run.stats().chunks;
    total.evicted_tokens += run.stats().evicted_tokens;
    total.out_of_memory += run.stats().out_of_memory;
    total.splits += run.stats().splits;
  }
  // The runs must have exercised sharing, chunking, splitting, eviction and memory pressure.
  EXPECT_GT(total.shared_matches, 100u);
  EXPECT_GT(total.chunks, 100u);
  EXPECT_GT(total.splits, 10u);
  EXPECT_GT(total.evicted_tokens, 0u);
  EXPECT_GT(total.out_of_memory, 10u);
  std::printf("shared matches %zu, chunks %zu, splits %zu, evicted tokens %zu, oom %zu\n",
              total.shared_matches, total.chunks, total.splits, total.evicted_tokens,
              total.out_of_memory);
}

INSTANTIATE_TEST_SUITE_P(PageSizes, RadixCachePropertyTest, ::testing::Values(1, 4, 16),
                         [](const ::testing::TestParamInfo<int32_t>& info) {
                           return "page" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace radixserve::kv

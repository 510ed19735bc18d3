#include "kv/token_to_kv_pool.h"

#include <algorithm>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace radixserve::kv {
namespace {

TokenToKVPool MakePool(size_t size, int32_t page_size) {
  TokenToKVPoolOptions options;
  options.size = size;
  options.page_size = page_size;
  Expected<TokenToKVPool> pool = TokenToKVPool::Create(options);
  RADIX_CHECK(pool.ok());
  return std::move(pool).value();
}

TEST(TokenToKVPoolTest, PageOneHandsOutSlotsFromOne) {
  TokenToKVPool pool = MakePool(8, 1);
  EXPECT_EQ(pool.size(), 8u);
  EXPECT_EQ(pool.available_size(), 8u);
  Expected<std::vector<int32_t>> slots = pool.Alloc(3);
  ASSERT_TRUE(slots.ok());
  EXPECT_EQ(*slots, (std::vector<int32_t>{1, 2, 3}));  // slot 0 is the padding slot
  EXPECT_EQ(pool.available_size(), 5u);
  EXPECT_EQ(pool.used_size(), 3u);
  pool.Free(*slots);
  EXPECT_EQ(pool.available_size(), 8u);
}

TEST(TokenToKVPoolTest, ExhaustionReturnsErrorAndChangesNothing) {
  TokenToKVPool pool = MakePool(4, 1);
  ASSERT_TRUE(pool.Alloc(3).ok());
  Expected<std::vector<int32_t>> more = pool.Alloc(2);
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.available_size(), 1u);

  // A batch that does not fit as a whole takes nothing.
  const ExtendSpec specs[2] = {{0, 1, -1}, {0, 1, -1}};
  EXPECT_FALSE(pool.AllocExtend(specs).ok());
  EXPECT_EQ(pool.available_size(), 1u);
  EXPECT_TRUE(pool.AllocExtend(std::span(specs, 1)).ok());
  EXPECT_EQ(pool.available_size(), 0u);
}

TEST(TokenToKVPoolTest, PagedAllocTakesWholePages) {
  TokenToKVPool pool = MakePool(64, 16);
  EXPECT_EQ(pool.num_pages(), 4u);
  Expected<std::vector<int32_t>> slots = pool.Alloc(32);
  ASSERT_TRUE(slots.ok());
  ASSERT_EQ(slots->size(), 32u);
  for (int i = 0; i < 32; ++i) EXPECT_EQ((*slots)[i], 16 + i);  // pages 1 and 2
  EXPECT_EQ(pool.available_size(), 32u);
  EXPECT_FALSE(pool.IsPageFree(0));
  EXPECT_FALSE(pool.IsPageFree(1));
  EXPECT_TRUE(pool.IsPageFree(3));
}

TEST(TokenToKVPoolTest, ExtendContinuesThePartialPage) {
  TokenToKVPool pool = MakePool(64, 16);
  // A 20-token prompt: one full page and 4 tokens of a second page.
  const ExtendSpec first{0, 20, -1};
  Expected<std::vector<int32_t>> a = pool.AllocExtend({&first, 1});
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->size(), 20u);
  EXPECT_EQ((*a)[0], 16);
  EXPECT_EQ((*a)[19], 35);  // page 2, offset 3
  EXPECT_EQ(pool.available_size(), 32u);

  // Extending to 40 fills page 2 (offsets 4..15) first, then page 3 (offsets 0..7).
  const ExtendSpec second{20, 40, a->back()};
  EXPECT_EQ(pool.PagesNeeded({&second, 1}), 1u);
  Expected<std::vector<int32_t>> b = pool.AllocExtend({&second, 1});
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->size(), 20u);
  EXPECT_EQ((*b)[0], 36);
  EXPECT_EQ((*b)[11], 47);
  EXPECT_EQ((*b)[12], 48);
  EXPECT_EQ((*b)[19], 55);
  EXPECT_EQ(pool.available_size(), 16u);

  // Decode at a page boundary needs a new page; inside a page it needs none.
  const ExtendSpec inside{40, 41, b->back()};
  EXPECT_EQ(pool.PagesNeeded({&inside, 1}), 0u);
  const ExtendSpec boundary{48, 49, 63};
  EXPECT_EQ(pool.PagesNeeded({&boundary, 1}), 1u);
  Expected<std::vector<int32_t>> c = pool.AllocExtend({&inside, 1});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, std::vector<int32_t>{56});
}

TEST(TokenToKVPoolTest, FreeingAnySlotOfAPageFreesThePageOnce) {
  TokenToKVPool pool = MakePool(32, 16);
  Expected<std::vector<int32_t>> slots = pool.Alloc(32);
  ASSERT_TRUE(slots.ok());
  // Three slots of page 1 and one of page 2: both pages come back, each once.
  const int32_t some[4] = {16, 17, 20, 40};
  pool.Free(some);
  EXPECT_EQ(pool.available_size(), 32u);
  // Freed pages are reused first, lowest page first.
  Expected<std::vector<int32_t>> again = pool.Alloc(16);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->front(), 16);
}

// Breaks in a sequence's slots: places where a slot is not its predecessor plus one.
int Breaks(const std::vector<int32_t>& slots) {
  int breaks = 0;
  for (size_t i = 1; i < slots.size(); ++i) breaks += slots[i] != slots[i - 1] + 1 ? 1 : 0;
  return breaks;
}

TEST(TokenToKVPoolTest, InterleavedDecodeStepsKeepEachSequenceInRuns) {
  TokenToKVPool pool = MakePool(4096, 1);
  constexpr int kSeqs = 8;
  std::vector<std::vector<int32_t>> rows(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    const ExtendSpec prompt{0, 40, -1};
    Expected<std::vector<int32_t>> slots = pool.AllocExtend({&prompt, 1});
    ASSERT_TRUE(slots.ok());
    rows[s] = *slots;
  }
  // 200 steps, each giving every sequence one slot in one batch, as decode does.
  for (int step = 0; step < 200; ++step) {
    std::vector<ExtendSpec> specs;
    for (const std::vector<int32_t>& row : rows)
      specs.push_back({row.size(), row.size() + 1, row.back()});
    Expected<std::vector<int32_t>> slots = pool.AllocExtend(specs);
    ASSERT_TRUE(slots.ok());
    ASSERT_EQ(slots->size(), static_cast<size_t>(kSeqs));
    for (int s = 0; s < kSeqs; ++s) rows[s].push_back((*slots)[s]);
  }
  std::set<int32_t> all;
  for (const std::vector<int32_t>& row : rows) {
    all.insert(row.begin(), row.end());
    // 240 slots: a break at most where a run of 32 ends.
    EXPECT_LE(Breaks(row), 240 / kRunSlots + 1);
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kSeqs * 240));
  EXPECT_EQ(pool.available_size(), 4096u - kSeqs * 240);
}

TEST(TokenToKVPoolTest, WithNoWholeRunFreeAllocationTakesScatteredPages) {
  TokenToKVPool pool = MakePool(256, 1);
  Expected<std::vector<int32_t>> all = pool.Alloc(256);
  ASSERT_TRUE(all.ok());
  // Free every other slot: each run is half free, none wholly.
  std::vector<int32_t> odd;
  for (int32_t slot : *all) {
    if (slot % 2 == 1) odd.push_back(slot);
  }
  pool.Free(odd);
  EXPECT_EQ(pool.available_size(), 128u);
  const ExtendSpec spec{0, 128, -1};
  Expected<std::vector<int32_t>> again = pool.AllocExtend({&spec, 1});
  ASSERT_TRUE(again.ok());
  std::vector<int32_t> sorted = *again;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, odd);
  EXPECT_EQ(pool.available_size(), 0u);
  EXPECT_FALSE(pool.AllocExtend({&spec, 1}).ok());
}

// Random allocations, extensions and frees against a model of which slots are held: no slot is
// handed out twice, the counts agree, and a wholly freed pool hands out runs again.
TEST(TokenToKVPoolTest, RandomChurnKeepsTheCountsAndNeverHandsOutAHeldSlot) {
  for (const int32_t page_size : {1, 4, 16, 64}) {
    TokenToKVPool pool = MakePool(2048, page_size);
    std::vector<std::vector<int32_t>> seqs;
    std::set<int32_t> held;
    uint64_t state = 12345;
    auto next = [&](uint64_t n) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return (state >> 33) % n;
    };
    for (int op = 0; op < 1500; ++op) {
      const uint64_t kind = next(10);
      if (kind < 3 || seqs.empty()) {
        const ExtendSpec spec{0, 1 + next(100), -1};
        Expected<std::vector<int32_t>> slots = pool.AllocExtend({&spec, 1});
        if (slots.ok()) seqs.push_back(*slots);
      } else if (kind < 8) {
        std::vector<int32_t>& row = seqs[next(seqs.size())];
        const ExtendSpec spec{row.size(), row.size() + 1 + next(3), row.back()};
        Expected<std::vector<int32_t>> slots = pool.AllocExtend({&spec, 1});
        if (slots.ok()) row.insert(row.end(), slots->begin(), slots->end());
      } else {
        const size_t i = next(seqs.size());
        pool.Free(seqs[i]);
        seqs.erase(seqs.begin() + static_cast<std::ptrdiff_t>(i));
      }
      held.clear();
      size_t held_pages = 0;
      for (const std::vector<int32_t>& row : seqs) {
        for (int32_t slot : row) {
          ASSERT_TRUE(held.insert(slot).second) << "slot " << slot << " handed out twice";
          ASSERT_FALSE(pool.IsPageFree(static_cast<size_t>(slot / page_size)));
        }
        held_pages += (row.size() + page_size - 1) / page_size;
      }
      ASSERT_EQ(pool.available_size(), 2048u - held_pages * page_size);
    }
    for (const std::vector<int32_t>& row : seqs) pool.Free(row);
    EXPECT_EQ(pool.available_size(), 2048u);
    Expected<std::vector<int32_t>> whole = pool.Alloc(2048);
    ASSERT_TRUE(whole.ok());
  }
}

TEST(TokenToKVPoolTest, ClearAndRejectsBadSize) {
  TokenToKVPool pool = MakePool(32, 16);
  ASSERT_TRUE(pool.Alloc(16).ok());
  pool.Clear();
  EXPECT_EQ(pool.available_size(), 32u);
  TokenToKVPoolOptions options;
  options.size = 20;
  options.page_size = 16;
  EXPECT_FALSE(TokenToKVPool::Create(options).ok());
}

TEST(TokenToKVPoolTest, StorageHasRowsForThePaddingPage) {
  TokenToKVPoolOptions options;
  options.size = 32;
  options.page_size = 16;
  options.num_layers = 2;
  options.kv_heads = 1;
  options.head_dim = 4;
  Expected<TokenToKVPool> pool = TokenToKVPool::Create(options);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(pool->storage().spec().num_rows, 48u);
  EXPECT_EQ(pool->storage().layer(1).num_rows, 48u);
}

TEST(TokenToKVPoolDeathTest, DoubleFreeIsABug) {
  TokenToKVPool pool = MakePool(8, 1);
  Expected<std::vector<int32_t>> slots = pool.Alloc(1);
  ASSERT_TRUE(slots.ok());
  pool.Free(*slots);
  EXPECT_DEATH(pool.Free(*slots), "double free");
}

}  // namespace
}  // namespace radixserve::kv

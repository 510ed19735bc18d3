#include "kv/kv_rows.h"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "kv/leak_check.h"
#include "kv/req_to_token_pool.h"

namespace radixserve::kv {
namespace {

constexpr int32_t kLayers = 2;
constexpr int32_t kHeads = 2;
constexpr int32_t kHeadDim = 4;

// A token's row value, a function of (token, layer, K or V, element) only: rows moved from one
// pool to another can be checked against what computing them would have written.
float RowValue(int32_t token, int32_t layer, bool is_v, size_t element) {
  return static_cast<float>(token) * 0.5f + static_cast<float>(layer) * 100.0f +
         (is_v ? 1000.0f : 0.0f) + static_cast<float>(element) * 0.25f;
}

struct Server {  // one server's pool, request rows and radix cache
  explicit Server(int32_t page, KvDtype dtype = KvDtype::kF32) {
    TokenToKVPoolOptions options;
    options.size = 128;
    options.page_size = page;
    options.num_layers = kLayers;
    options.kv_heads = kHeads;
    options.head_dim = kHeadDim;
    options.dtype = dtype;
    Expected<TokenToKVPool> made = TokenToKVPool::Create(options);
    RADIX_CHECK(made.ok());
    pool = std::make_unique<TokenToKVPool>(std::move(made).value());
    req_pool = std::make_unique<ReqToTokenPool>(4, 200);
    cache = std::make_unique<RadixCache>(pool.get(), req_pool.get(),
                                         RadixCacheOptions{page, EvictionPolicy::kLru});
  }

  // "Computes" tokens: their rows get RowValue in fresh slots (whole pages are taken; the tail
  // of the last one stays unused).
  std::vector<int32_t> Compute(const std::vector<int32_t>& tokens) {
    const size_t page = static_cast<size_t>(pool->page_size());
    Expected<std::vector<int32_t>> slots = pool->Alloc((tokens.size() + page - 1) / page * page);
    RADIX_CHECK(slots.ok());
    slots->resize(tokens.size());
    const size_t n = static_cast<size_t>(kHeads * kHeadDim);
    std::vector<float> k(n), v(n);
    for (int32_t layer = 0; layer < kLayers; ++layer) {
      for (size_t i = 0; i < tokens.size(); ++i) {
        for (size_t e = 0; e < n; ++e) {
          k[e] = RowValue(tokens[i], layer, false, e);
          v[e] = RowValue(tokens[i], layer, true, e);
        }
        pool->storage().StoreKv(layer, std::span(&(*slots)[i], 1), k.data(), v.data());
      }
    }
    return *slots;
  }

  void ExpectRows(const std::vector<int32_t>& tokens, std::span<const int32_t> slots) {
    const size_t n = static_cast<size_t>(kHeads * kHeadDim);
    std::vector<float> k(n), v(n);
    for (int32_t layer = 0; layer < kLayers; ++layer) {
      for (size_t i = 0; i < slots.size(); ++i) {
        pool->storage().LoadKv(layer, slots[i], k.data(), v.data());
        for (size_t e = 0; e < n; ++e) {
          ASSERT_EQ(k[e], RowValue(tokens[i], layer, false, e)) << "token " << i;
          ASSERT_EQ(v[e], RowValue(tokens[i], layer, true, e)) << "token " << i;
        }
      }
    }
  }

  std::unique_ptr<TokenToKVPool> pool;
  std::unique_ptr<ReqToTokenPool> req_pool;
  std::unique_ptr<RadixCache> cache;
};

std::vector<int32_t> Tokens(size_t n, int32_t base) {
  std::vector<int32_t> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = base + static_cast<int32_t>(i);
  return tokens;
}

// The prefill server's rows of a prompt.
KvRows Export(Server& server, const std::vector<int32_t>& tokens) {
  const std::vector<int32_t> slots = server.Compute(tokens);
  KvRows rows;
  rows.layout = LayoutOf(server.pool->storage());
  rows.tokens = tokens;
  rows.bytes.resize(rows.ExpectedBytes());
  GatherRows(server.pool->storage(), slots, rows.bytes.data());
  return rows;
}

class KvRowsTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(KvRowsTest, InsertedRowsMatchWhatTheOtherPoolComputed) {
  Server prefill(GetParam()), decode(GetParam());
  const std::vector<int32_t> prompt = Tokens(21, 100);
  const KvRows rows = Export(prefill, prompt);
  ASSERT_EQ(rows.layout, LayoutOf(decode.pool->storage()));

  const size_t max_len = MaxPrefixMatchLen(prompt.size());
  RadixNode* node = InsertRows(*decode.cache, *decode.pool, rows, "ns", max_len);
  ASSERT_NE(node, nullptr);
  const size_t page = static_cast<size_t>(GetParam());
  const size_t expected = max_len / page * page;
  MatchResult match = decode.cache->MatchPrefix(CacheKey{prompt, "ns"});
  ASSERT_EQ(match.matched_len(), expected);
  EXPECT_EQ(match.last_node, node);
  decode.ExpectRows(prompt, match.device_indices);
  // Locked until released: eviction cannot take it.
  EXPECT_EQ(decode.cache->Evict(decode.pool->size()), 0u);
  EXPECT_EQ(decode.cache->MatchPrefix(CacheKey{prompt, "ns"}).matched_len(), expected);
  // Another namespace does not see it.
  EXPECT_EQ(decode.cache->MatchPrefix(CacheKey{prompt, "other"}).matched_len(), 0u);

  decode.cache->DecLockRef(node);
  EXPECT_TRUE(CheckKvLeak(*decode.pool, *decode.cache, decode.req_pool.get()).ok());
  EXPECT_EQ(decode.cache->Evict(decode.pool->size()), expected);
  EXPECT_TRUE(CheckKvLeak(*decode.pool, *decode.cache, decode.req_pool.get()).ok());
}

TEST_P(KvRowsTest, RowsAlreadyCachedAreKeptAndTheRestAdded) {
  Server prefill(GetParam()), decode(GetParam());
  const std::vector<int32_t> prompt = Tokens(33, 7);
  const KvRows rows = Export(prefill, prompt);
  // The decode server has the first 16 tokens cached already (computed itself).
  const std::vector<int32_t> head(prompt.begin(), prompt.begin() + 16);
  const std::vector<int32_t> head_slots = decode.Compute(head);
  ASSERT_EQ(decode.cache->Insert(CacheKey{head, ""}, head_slots), 0u);

  RadixNode* node = InsertRows(*decode.cache, *decode.pool, rows, "", 32);
  ASSERT_NE(node, nullptr);
  MatchResult match = decode.cache->MatchPrefix(CacheKey{prompt, ""});
  ASSERT_EQ(match.matched_len(), 32u);
  EXPECT_EQ(std::vector<int32_t>(match.device_indices.begin(), match.device_indices.begin() + 16),
            head_slots);
  decode.ExpectRows(prompt, match.device_indices);
  // Inserting the same rows again adds nothing and locks the same node.
  RadixNode* again = InsertRows(*decode.cache, *decode.pool, rows, "", 32);
  EXPECT_EQ(again, node);
  decode.cache->DecLockRef(again);
  decode.cache->DecLockRef(node);
  EXPECT_TRUE(CheckKvLeak(*decode.pool, *decode.cache, decode.req_pool.get()).ok());
}

TEST_P(KvRowsTest, NoMemoryInsertsNothing) {
  Server prefill(GetParam()), decode(GetParam());
  const KvRows rows = Export(prefill, Tokens(100, 1));
  // Every slot of the decode pool is taken by a live (unevictable) allocation.
  Expected<std::vector<int32_t>> taken = decode.pool->Alloc(decode.pool->available_size());
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(InsertRows(*decode.cache, *decode.pool, rows, "", 99), nullptr);
  EXPECT_EQ(decode.cache->MatchPrefix(CacheKey{rows.tokens, ""}).matched_len(), 0u);
  decode.pool->Free(*taken);
  EXPECT_TRUE(CheckKvLeak(*decode.pool, *decode.cache, decode.req_pool.get()).ok());
}

INSTANTIATE_TEST_SUITE_P(PageSizes, KvRowsTest, ::testing::Values(1, 4));

TEST(KvRowsLayoutTest, DiffersWithTheElementType) {
  Server f32(1, KvDtype::kF32), bf16(1, KvDtype::kBF16);
  const KvRowsLayout a = LayoutOf(f32.pool->storage());
  const KvRowsLayout b = LayoutOf(bf16.pool->storage());
  EXPECT_NE(a, b);
  EXPECT_NE(a.fingerprint, b.fingerprint);
  EXPECT_NE(a.Describe(), b.Describe());
}

}  // namespace
}  // namespace radixserve::kv

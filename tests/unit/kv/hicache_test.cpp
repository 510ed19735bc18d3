#include "kv/hicache.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kv/disk_kv_store.h"
#include "kv/kv_block_hash.h"
#include "kv/leak_check.h"
#include "kv_test_util.h"

namespace radixserve::kv {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kLayers = 2;
constexpr int32_t kHeads = 2;
constexpr int32_t kHeadDim = 4;
constexpr size_t kBlock = 8;

std::string TempDir() {
  std::string pattern = (fs::temp_directory_path() / "hicache_test_XXXXXX").string();
  RADIX_CHECK(::mkdtemp(pattern.data()) != nullptr);
  return pattern;
}

std::vector<std::string> BlockFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".rkv") out.push_back(entry.path().string());
  }
  return out;
}

std::vector<int32_t> Tokens(size_t n, int32_t base) {
  std::vector<int32_t> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = base + static_cast<int32_t>(i);
  return tokens;
}

// The K/V value a token's row holds in these tests: a function of the token and the layer only,
// so a row loaded from storage can be checked against what computing it would give.
float RowValue(int32_t token, int32_t layer, bool is_v, size_t element) {
  return static_cast<float>(token) * 0.5f + static_cast<float>(layer) * 100.0f +
         (is_v ? 1000.0f : 0.0f) + static_cast<float>(element) * 0.25f;
}

// --- DiskKvStore -----------------------------------------------------------------------------

class DiskKvStoreTest : public ::testing::Test {
 protected:
  DiskKvStoreTest() : dir_(TempDir()) {}
  ~DiskKvStoreTest() override { fs::remove_all(dir_); }

  DiskKvStoreOptions Options(uint64_t tag = 7) const {
    DiskKvStoreOptions options;
    options.directory = dir_;
    options.capacity_bytes = 1 << 20;
    options.model_tag = tag;
    options.block_tokens = kBlock;
    options.payload_bytes = 64;
    return options;
  }
  static KvBlock Block(uint64_t hash, uint8_t fill) {
    KvBlock block;
    block.hash = hash;
    block.parent_hash = hash - 1;
    block.tokens = Tokens(kBlock, static_cast<int32_t>(hash));
    block.extra_key = "B";
    block.payload = std::make_shared<std::vector<std::byte>>(64, std::byte{fill});
    return block;
  }
  static std::vector<DiskKvStore::Completed> Settle(DiskKvStore& store) {
    store.Drain();
    return store.TakeCompleted();
  }

  std::string dir_;
};

TEST_F(DiskKvStoreTest, WritesReadsAndFindsBlocksAgainAfterRestart) {
  {
    Expected<std::unique_ptr<DiskKvStore>> store = DiskKvStore::Open(Options());
    ASSERT_TRUE(store.ok()) << store.status().message();
    EXPECT_TRUE((*store)->Write(Block(100, 3)));
    EXPECT_TRUE((*store)->Has(100));
    EXPECT_FALSE((*store)->Contains(100));  // queued, not on disk yet
    std::vector<DiskKvStore::Completed> done = Settle(**store);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_TRUE(done[0].is_write && done[0].ok);
    EXPECT_TRUE((*store)->Contains(100));
  }
  Expected<std::unique_ptr<DiskKvStore>> store = DiskKvStore::Open(Options());
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE((*store)->Contains(100));
  (*store)->Read(100);
  std::vector<DiskKvStore::Completed> done = Settle(**store);
  ASSERT_EQ(done.size(), 1u);
  ASSERT_TRUE(done[0].ok);
  EXPECT_EQ(done[0].block.tokens, Tokens(kBlock, 100));
  EXPECT_EQ(done[0].block.parent_hash, 99u);
  EXPECT_EQ(done[0].block.extra_key, "B");
  EXPECT_EQ(*done[0].block.payload, std::vector<std::byte>(64, std::byte{3}));
}

TEST_F(DiskKvStoreTest, AnotherModelsBlocksAreIgnoredAndKept) {
  {
    auto store = DiskKvStore::Open(Options(/*tag=*/7));
    ASSERT_TRUE(store.ok());
    (*store)->Write(Block(100, 1));
    Settle(**store);
  }
  auto other = DiskKvStore::Open(Options(/*tag=*/8));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE((*other)->Contains(100));
  EXPECT_EQ(BlockFiles(dir_).size(), 1u);
}

TEST_F(DiskKvStoreTest, TruncatedOrCorruptFilesAreDeletedNeverServed) {
  {
    auto store = DiskKvStore::Open(Options());
    ASSERT_TRUE(store.ok());
    (*store)->Write(Block(100, 1));
    (*store)->Write(Block(200, 2));
    Settle(**store);
  }
  std::vector<std::string> files = BlockFiles(dir_);
  ASSERT_EQ(files.size(), 2u);
  const std::string truncated = files[0];
  const std::string corrupt = files[1];
  fs::resize_file(truncated, fs::file_size(truncated) - 5);
  {
    std::fstream f(corrupt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  auto store = DiskKvStore::Open(Options());
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE(fs::exists(truncated));  // the scan sees its size disagree with the header
  const uint64_t corrupt_hash = (*store)->Contains(100) ? 100 : 200;
  ASSERT_TRUE((*store)->Contains(corrupt_hash));
  (*store)->Read(corrupt_hash);
  std::vector<DiskKvStore::Completed> done = Settle(**store);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].ok);
  EXPECT_EQ(done[0].block.payload, nullptr);
  EXPECT_FALSE((*store)->Contains(corrupt_hash));
  EXPECT_FALSE(fs::exists(corrupt));
}

TEST_F(DiskKvStoreTest, DeletedWhileRunningIsAFailedRead) {
  auto store = DiskKvStore::Open(Options());
  ASSERT_TRUE(store.ok());
  (*store)->Write(Block(100, 1));
  Settle(**store);
  for (const std::string& file : BlockFiles(dir_)) fs::remove(file);
  (*store)->Read(100);
  std::vector<DiskKvStore::Completed> done = Settle(**store);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].ok);
  EXPECT_FALSE((*store)->Contains(100));
}

TEST_F(DiskKvStoreTest, CapacityEvictsLeastRecentlyUsedFiles) {
  DiskKvStoreOptions options = Options();
  auto probe = DiskKvStore::Open(options);
  ASSERT_TRUE(probe.ok());
  (*probe)->Write(Block(1, 1));
  Settle(**probe);
  const uint64_t file_bytes = (*probe)->stats().bytes;
  (*probe)->Clear();
  (*probe)->Drain();
  probe->reset();

  options.capacity_bytes = 3 * file_bytes;
  auto store = DiskKvStore::Open(options);
  ASSERT_TRUE(store.ok());
  for (uint64_t h = 10; h < 13; ++h) (*store)->Write(Block(h, 1));
  Settle(**store);
  (*store)->Touch(10);  // 11 is now the least recently used
  (*store)->Write(Block(13, 1));
  Settle(**store);
  (*store)->Drain();
  EXPECT_TRUE((*store)->Contains(10));
  EXPECT_FALSE((*store)->Contains(11));
  EXPECT_TRUE((*store)->Contains(12));
  EXPECT_TRUE((*store)->Contains(13));
  EXPECT_EQ(BlockFiles(dir_).size(), 3u);
  EXPECT_EQ((*store)->stats().evicted_files, 1u);
}

TEST_F(DiskKvStoreTest, LeftoverTemporaryFilesAreRemovedAndClearEmptiesTheDirectory) {
  std::ofstream(dir_ + "/0000000000000001.rkv.123.tmp") << "partial";
  auto store = DiskKvStore::Open(Options());
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE(fs::exists(dir_ + "/0000000000000001.rkv.123.tmp"));
  (*store)->Write(Block(5, 1));
  Settle(**store);
  EXPECT_EQ(BlockFiles(dir_).size(), 1u);
  (*store)->Clear();
  (*store)->Drain();
  EXPECT_TRUE(BlockFiles(dir_).empty());
  EXPECT_FALSE((*store)->Contains(5));
}

TEST_F(DiskKvStoreTest, UnwritableDirectoryIsAClearError) {
  DiskKvStoreOptions options = Options();
  const std::string file = dir_ + "/a_file";
  std::ofstream(file) << "x";
  options.directory = file + "/sub";
  auto store = DiskKvStore::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(file), std::string::npos);
}

TEST_F(DiskKvStoreTest, AFailedWriteIsDroppedAndTheStoreGoesOn) {
  auto store = DiskKvStore::Open(Options());
  ASSERT_TRUE(store.ok());
  // The directory disappears under the server: the write fails, nothing is indexed.
  fs::remove_all(dir_);
  (*store)->Write(Block(100, 1));
  std::vector<DiskKvStore::Completed> done = Settle(**store);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].ok);
  EXPECT_FALSE((*store)->Has(100));
  EXPECT_EQ((*store)->stats().failed_writes, 1u);
  fs::create_directories(dir_);
  (*store)->Write(Block(100, 1));
  Settle(**store);
  EXPECT_TRUE((*store)->Contains(100));
}

// --- HiCache over a radix cache --------------------------------------------------------------

class HiCacheTest : public ::testing::TestWithParam<int32_t> {
 protected:
  HiCacheTest() : dir_(TempDir()) { Build(HiCacheWritePolicy::kWriteThrough); }
  ~HiCacheTest() override {
    hicache_.reset();
    fs::remove_all(dir_);
  }

  // A new process: fresh pool and radix cache, the tier over the same directory.
  void Build(HiCacheWritePolicy policy, uint64_t tag = 1, uint64_t capacity = 64 << 20) {
    hicache_.reset();
    cache_.reset();
    TokenToKVPoolOptions options;
    options.size = 256;
    options.page_size = GetParam();
    options.num_layers = kLayers;
    options.kv_heads = kHeads;
    options.head_dim = kHeadDim;
    options.dtype = KvDtype::kF32;
    Expected<TokenToKVPool> pool = TokenToKVPool::Create(options);
    RADIX_CHECK(pool.ok());
    pool_ = std::make_unique<TokenToKVPool>(std::move(pool).value());
    req_pool_ = std::make_unique<ReqToTokenPool>(8, 300);
    cache_ = std::make_unique<RadixCache>(pool_.get(), req_pool_.get(),
                                          RadixCacheOptions{GetParam(), EvictionPolicy::kLru});
    HiCacheOptions hoptions;
    hoptions.directory = dir_;
    hoptions.capacity_bytes = capacity;
    hoptions.model_tag = tag;
    hoptions.block_tokens = kBlock;
    hoptions.write_policy = policy;
    hoptions.prefetch_policy = HiCachePrefetchPolicy::kWaitComplete;
    hoptions.prefetch_threshold = kBlock;
    hoptions.persistable = [](std::string_view ns) { return ns.empty() || ns[0] != 'L'; };
    Expected<std::unique_ptr<HiCache>> hicache =
        HiCache::Create(hoptions, cache_.get(), pool_.get());
    ASSERT_TRUE(hicache.ok()) << hicache.status().message();
    hicache_ = std::move(hicache).value();
  }

  // Computes (writes the test's K/V rows for) tokens and inserts them into the cache.
  void InsertComputed(const std::vector<int32_t>& all, const std::string& ns = "B") {
    const size_t page = static_cast<size_t>(GetParam());
    const std::vector<int32_t> tokens(all.begin(), all.begin() + all.size() / page * page);
    const size_t matched = cache_->PeekMatchLength(CacheKey{tokens, ns});
    MatchResult match = cache_->MatchPrefix(CacheKey{tokens, ns});
    ASSERT_EQ(match.matched_len(), matched);
    Expected<std::vector<int32_t>> slots = pool_->Alloc(tokens.size() - matched);
    ASSERT_TRUE(slots.ok());
    WriteRows(std::span(tokens).subspan(matched), *slots);
    std::vector<int32_t> value = match.device_indices;
    value.insert(value.end(), slots->begin(), slots->end());
    EXPECT_EQ(cache_->Insert(CacheKey{tokens, ns}, value), matched);
  }
  void WriteRows(std::span<const int32_t> tokens, std::span<const int32_t> slots) {
    const size_t row = kHeads * kHeadDim;
    for (int32_t layer = 0; layer < kLayers; ++layer) {
      std::vector<float> k(tokens.size() * row);
      std::vector<float> v(tokens.size() * row);
      for (size_t t = 0; t < tokens.size(); ++t) {
        for (size_t e = 0; e < row; ++e) {
          k[t * row + e] = RowValue(tokens[t], layer, false, e);
          v[t * row + e] = RowValue(tokens[t], layer, true, e);
        }
      }
      pool_->storage().StoreKv(layer, slots, k.data(), v.data());
    }
  }
  // Every cached row of tokens' match holds what computing them would.
  void ExpectRows(const std::vector<int32_t>& tokens, size_t expected_len,
                  const std::string& ns = "B") {
    MatchResult match = cache_->MatchPrefix(CacheKey{tokens, ns});
    ASSERT_EQ(match.matched_len(), expected_len);
    const size_t row = kHeads * kHeadDim;
    std::vector<float> k(row);
    std::vector<float> v(row);
    for (size_t t = 0; t < expected_len; ++t) {
      for (int32_t layer = 0; layer < kLayers; ++layer) {
        pool_->storage().LoadKv(layer, match.device_indices[t], k.data(), v.data());
        for (size_t e = 0; e < row; ++e) {
          ASSERT_EQ(k[e], RowValue(tokens[t], layer, false, e)) << "token " << t;
          ASSERT_EQ(v[e], RowValue(tokens[t], layer, true, e)) << "token " << t;
        }
      }
    }
  }
  // Loads the stored continuation of tokens' RAM match and checks the first `len` cached rows.
  void ExpectLoadedBack(const std::vector<int32_t>& tokens, size_t len,
                        const std::string& ns = "B") {
    const uint64_t op = hicache_->Prefetch(tokens, ns);
    ASSERT_NE(op, 0u);
    Settle();
    ExpectRows(tokens, len, ns);
    hicache_->Release(op, 0);
  }
  // Every queued read and write done and taken in (and the deletions that caused).
  void Settle() {
    hicache_->store().Drain();
    hicache_->Poll();
    hicache_->store().Drain();
  }
  void EvictAll() { cache_->Evict(cache_->EvictableSize()); }
  void ExpectHealthy() {
    Status invariants = cache_->CheckInvariants();
    EXPECT_TRUE(invariants.ok()) << invariants.message();
  }

  std::string dir_;
  std::unique_ptr<TokenToKVPool> pool_;
  std::unique_ptr<ReqToTokenPool> req_pool_;
  std::unique_ptr<RadixCache> cache_;
  std::unique_ptr<HiCache> hicache_;
};

INSTANTIATE_TEST_SUITE_P(PageSizes, HiCacheTest, ::testing::Values(1, 4, 8));

TEST_P(HiCacheTest, AnEvictedPrefixComesBackFromStorageWithItsRows) {
  const std::vector<int32_t> tokens = Tokens(5 * kBlock + 3, 1000);
  InsertComputed(tokens);
  Settle();
  EXPECT_EQ(BlockFiles(dir_).size(), 5u);  // the 3-token tail is not a whole block
  EvictAll();
  EXPECT_EQ(cache_->PeekMatchLength(CacheKey{tokens, "B"}), 0u);

  const uint64_t op = hicache_->Prefetch(tokens, "B");
  ASSERT_NE(op, 0u);
  Settle();
  EXPECT_TRUE(hicache_->Ready(op, HiCache::Clock::now()));
  ExpectRows(tokens, 5 * kBlock);
  ExpectHealthy();
  // The load is locked for its sequence until Release.
  EXPECT_EQ(cache_->ProtectedSize(), 5 * kBlock);
  EXPECT_EQ(hicache_->Release(op, 5 * kBlock), 5 * kBlock);
  EXPECT_EQ(cache_->ProtectedSize(), 0u);
  EXPECT_EQ(hicache_->stats().prefetched_tokens, 5 * kBlock);
  ExpectHealthy();
}

TEST_P(HiCacheTest, ALoadContinuesWhatIsStillInRam) {
  const std::vector<int32_t> shared = Tokens(2 * kBlock, 1000);
  std::vector<int32_t> longer = shared;
  const std::vector<int32_t> tail = Tokens(4 * kBlock, 5000);
  longer.insert(longer.end(), tail.begin(), tail.end());
  InsertComputed(longer);
  Settle();
  // Evict the long branch only: keep the shared part locked while evicting.
  MatchResult keep = cache_->MatchPrefix(CacheKey{shared, "B"});
  cache_->IncLockRef(keep.last_node);
  EvictAll();
  cache_->DecLockRef(keep.last_node);
  EXPECT_EQ(cache_->PeekMatchLength(CacheKey{longer, "B"}), 2 * kBlock);

  const uint64_t op = hicache_->Prefetch(longer, "B");
  ASSERT_NE(op, 0u);
  Settle();
  ExpectRows(longer, 6 * kBlock);
  EXPECT_EQ(hicache_->Release(op, 6 * kBlock), 4 * kBlock);
  ExpectHealthy();
}

TEST_P(HiCacheTest, TwoWaitersShareOneRead) {
  const std::vector<int32_t> tokens = Tokens(4 * kBlock, 1000);
  InsertComputed(tokens);
  Settle();
  EvictAll();
  const uint64_t a = hicache_->Prefetch(tokens, "B");
  const uint64_t b = hicache_->Prefetch(tokens, "B");
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  Settle();
  EXPECT_EQ(hicache_->store().stats().read_blocks, 4u);
  ExpectRows(tokens, 4 * kBlock);
  hicache_->Release(a, 4 * kBlock);
  hicache_->Release(b, 4 * kBlock);
  EXPECT_EQ(cache_->ProtectedSize(), 0u);
  EXPECT_EQ(hicache_->stats().prefetched_tokens, 4 * kBlock);  // inserted once
  ExpectHealthy();
}

TEST_P(HiCacheTest, WaitCompleteHoldsTheSequenceUntilTheLoadEnds) {
  const std::vector<int32_t> tokens = Tokens(4 * kBlock, 1000);
  InsertComputed(tokens);
  Settle();
  EvictAll();
  const uint64_t op = hicache_->Prefetch(tokens, "B");
  ASSERT_NE(op, 0u);
  // Not polled yet: the load has not been taken in, whatever the I/O thread did.
  EXPECT_FALSE(hicache_->Ready(op, HiCache::Clock::now()));
  Settle();
  EXPECT_TRUE(hicache_->Ready(op, HiCache::Clock::now()));
  hicache_->Release(op, 0);
}

TEST_P(HiCacheTest, WriteBackStoresOnlyWhatIsEvicted) {
  Build(HiCacheWritePolicy::kWriteBack);
  const std::vector<int32_t> tokens = Tokens(3 * kBlock, 1000);
  InsertComputed(tokens);
  Settle();
  EXPECT_TRUE(BlockFiles(dir_).empty());
  EvictAll();
  Settle();
  EXPECT_EQ(BlockFiles(dir_).size(), 3u);
  ExpectLoadedBack(tokens, 3 * kBlock);
}

TEST_P(HiCacheTest, SelectiveWriteThroughWaitsForTheSecondHit) {
  Build(HiCacheWritePolicy::kWriteThroughSelective);
  const std::vector<int32_t> tokens = Tokens(2 * kBlock, 1000);
  InsertComputed(tokens);
  cache_->MatchPrefix(CacheKey{tokens, "B"});
  Settle();
  EXPECT_TRUE(BlockFiles(dir_).empty());
  cache_->MatchPrefix(CacheKey{tokens, "B"});
  Settle();
  EXPECT_EQ(BlockFiles(dir_).size(), 2u);
}

TEST_P(HiCacheTest, BlocksSurviveARestartButNotAModelChange) {
  const std::vector<int32_t> tokens = Tokens(3 * kBlock, 1000);
  InsertComputed(tokens);
  Settle();
  Build(HiCacheWritePolicy::kWriteThrough);  // a new process: empty RAM, same directory
  ExpectLoadedBack(tokens, 3 * kBlock);

  Build(HiCacheWritePolicy::kWriteThrough, /*tag=*/2);  // other weights
  EXPECT_EQ(hicache_->Prefetch(tokens, "B"), 0u);
  hicache_->SetModelTag(1);                        // the tag is part of every key
  EXPECT_EQ(hicache_->Prefetch(tokens, "B"), 0u);  // forgotten until a restart rescans
}

TEST_P(HiCacheTest, NamespacesAreSeparateAndAdaptersAreNeverStored) {
  const std::vector<int32_t> tokens = Tokens(3 * kBlock, 1000);
  InsertComputed(tokens, "Bsalt");
  InsertComputed(tokens, "L1:");
  Settle();
  EXPECT_EQ(BlockFiles(dir_).size(), 3u);
  EvictAll();
  EXPECT_EQ(hicache_->Prefetch(tokens, "B"), 0u);
  EXPECT_EQ(hicache_->Prefetch(tokens, "L1:"), 0u);
  ExpectLoadedBack(tokens, 3 * kBlock, "Bsalt");
}

TEST_P(HiCacheTest, AFileLostBeforeTheLoadLoadsTheBlocksBeforeIt) {
  const std::vector<int32_t> tokens = Tokens(4 * kBlock, 1000);
  InsertComputed(tokens);
  Settle();
  EvictAll();
  // Delete block 2's file: blocks 0 and 1 load, 2 and 3 are recomputed.
  const uint64_t seed = BlockChainSeed(1, "B");
  const std::vector<uint64_t> hashes = BlockHashes(seed, tokens, kBlock);
  char name[32];
  std::snprintf(name, sizeof(name), "/%016llx.rkv", static_cast<unsigned long long>(hashes[2]));
  ASSERT_TRUE(fs::remove(dir_ + name));
  ExpectLoadedBack(tokens, 2 * kBlock);
  ExpectHealthy();
  Status leaks = CheckKvLeak(*pool_, *cache_, req_pool_.get());
  EXPECT_TRUE(leaks.ok()) << leaks.message();
}

TEST_P(HiCacheTest, AFullStoreDropsTheEndOfAChainNotItsStart) {
  InsertComputed(Tokens(kBlock, 1));
  Settle();
  const uint64_t file_bytes = hicache_->store().stats().bytes;
  hicache_->ClearStorage();
  Settle();
  // A store with room for three blocks, and a chain of four.
  Build(HiCacheWritePolicy::kWriteThrough, /*tag=*/1, /*capacity=*/3 * file_bytes);
  const std::vector<int32_t> tokens = Tokens(4 * kBlock, 1000);
  InsertComputed(tokens);
  Settle();
  EXPECT_EQ(BlockFiles(dir_).size(), 3u);
  EvictAll();
  ExpectLoadedBack(tokens, 3 * kBlock);
}

TEST_P(HiCacheTest, ShortLoadsBelowTheThresholdAreNotStarted) {
  const std::vector<int32_t> tokens = Tokens(kBlock + 2, 1000);
  InsertComputed(tokens);
  Settle();
  EvictAll();
  const std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + kBlock - 1);
  EXPECT_EQ(hicache_->Prefetch(prefix, "B"), 0u);  // less than one block
  EXPECT_NE(hicache_->Prefetch(tokens, "B"), 0u);
}

}  // namespace
}  // namespace radixserve::kv

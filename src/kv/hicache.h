// HiCache: SGLang's hierarchical cache on a CPU. The RAM KV pool is the first tier (on a CPU it
// is host memory already); below it a storage tier (DiskKvStore, the `file` backend) keeps KV
// blocks of block_tokens tokens, keyed by a hash chain over the token prefix and the namespace
// (kv_block_hash.h), so a prefix evicted from RAM, or cached by an earlier run of the server with
// the same model, is loaded instead of recomputed.
//
// Writing (--hicache-write-policy, observed through RadixCacheObserver):
//   write_through            every block, as soon as the radix node holding its last token is
//                            inserted;
//   write_through_selective  when that node is matched for the second time (SGLang's threshold);
//   write_back               when that node is evicted from RAM.
// The block's K/V rows are copied out of the pool on the engine thread and written by the
// store's I/O thread; a block whose last token lies in the node is written with it (its first
// tokens may sit in ancestors, which are still in RAM). The tail of a sequence shorter than a
// block is not stored. Namespaces the options' `persistable` rejects are never stored (LoRA
// adapters are named by a per-process id).
//
// Loading (--hicache-storage-prefetch-policy): when a sequence is queued, Prefetch finds the
// stored blocks that continue its RAM match (consecutive from there) and, when they add at least
// prefetch_threshold tokens, reads them on the I/O thread while the engine goes on. Poll (engine
// thread, every loop) takes finished reads; once all of an operation's blocks are in, it checks
// each (tokens, namespace, parent key), allocates slots (evicting as admission would), copies the
// rows in and inserts them into the radix tree, locking the new node for the waiting sequence
// until Release. Two sequences that want the same blocks share the reads. Ready says whether a
// sequence may be admitted: best_effort at once (what is loaded by then is used), wait_complete
// once the load finished, timeout once it finished or prefetch_timeout_base +
// prefetch_timeout_per_ki_token * tokens / 1024 seconds passed.
//
// Thread affinity: engine thread only (the store's I/O thread is internal).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "kv/disk_kv_store.h"
#include "kv/radix_cache.h"
#include "kv/token_to_kv_pool.h"
#include "metrics/sglang_buckets.h"

namespace radixserve::kv {

enum class HiCacheWritePolicy { kWriteThrough, kWriteThroughSelective, kWriteBack };
enum class HiCachePrefetchPolicy { kBestEffort, kWaitComplete, kTimeout };

// SGLang's names; kInvalidArgument otherwise.
Expected<HiCacheWritePolicy> ParseHiCacheWritePolicy(std::string_view name);
Expected<HiCachePrefetchPolicy> ParseHiCachePrefetchPolicy(std::string_view name);

struct HiCacheOptions {
  std::string directory;
  // The storage tier's size bound: capacity_bytes, or when 0, capacity_ratio times the RAM
  // pool's KV bytes.
  uint64_t capacity_bytes = 0;
  double capacity_ratio = 2.0;
  uint64_t model_tag = 0;
  // Tokens per stored block; a multiple of the pool's page size.
  size_t block_tokens = 64;
  HiCacheWritePolicy write_policy = HiCacheWritePolicy::kWriteThrough;
  HiCachePrefetchPolicy prefetch_policy = HiCachePrefetchPolicy::kBestEffort;
  size_t prefetch_threshold = 256;              // tokens
  double prefetch_timeout_base = 1.0;           // seconds
  double prefetch_timeout_per_ki_token = 0.25;  // seconds per 1024 tokens
  // Namespaces (extra_key) whose KV may be stored; all when empty.
  std::function<bool(std::string_view)> persistable;
};

// A distribution kept as per-bucket counts over fixed upper bounds (the last bucket is +Inf), so
// snapshots can be copied around and a metrics layer can export what is new since its last look.
struct BucketCounts {
  std::vector<double> bounds;    // increasing upper bounds, without +Inf
  std::vector<uint64_t> counts;  // bounds.size() + 1 buckets
  double sum = 0.0;
  uint64_t count = 0;

  explicit BucketCounts(std::vector<double> upper = {})
      : bounds(std::move(upper)), counts(bounds.size() + 1, 0) {}
  void Observe(double value);
  void Add(const BucketCounts& other);
};

struct HiCacheStats {
  DiskKvStoreStats store;
  uint64_t backuped_tokens = 0;     // tokens written to storage
  uint64_t prefetched_tokens = 0;   // tokens loaded from storage into the RAM tree
  uint64_t prefetch_ops = 0;        // loads started
  uint64_t storage_hit_tokens = 0;  // tokens sequences matched that a load brought in
  // SGLang's storage histograms: blocks per load / per backup, and GB/s of loads and of the
  // writes finished between two polls (buckets as sglang:prefetch_pgs etc.).
  BucketCounts prefetch_pgs{metrics::StoragePagesBuckets()};
  BucketCounts backup_pgs{metrics::StoragePagesBuckets()};
  BucketCounts prefetch_bandwidth{metrics::StorageBandwidthBuckets()};
  BucketCounts backup_bandwidth{metrics::StorageBandwidthBuckets()};

  // Sums (data-parallel replicas).
  void Add(const HiCacheStats& other);
};

class HiCache final : public RadixCacheObserver {
 public:
  using Clock = std::chrono::steady_clock;

  // Opens the store and registers as the radix cache's observer. cache and pool are borrowed.
  static Expected<std::unique_ptr<HiCache>> Create(const HiCacheOptions& options, RadixCache* cache,
                                                   TokenToKVPool* pool);
  ~HiCache() override;

  HiCache(const HiCache&) = delete;
  HiCache& operator=(const HiCache&) = delete;

  void OnInsert(RadixNode& node) override;
  void OnHit(RadixNode& node) override;
  void OnEvict(RadixNode& leaf) override;

  // Starts loading the stored blocks beyond the RAM match of `tokens` (the caller passes at most
  // the tokens it may match). Returns the operation's id, or 0 when there is nothing to load.
  uint64_t Prefetch(std::span<const int32_t> tokens, std::string_view extra_key);
  // Whether the sequence waiting on `op` may be admitted now (see the policies above).
  bool Ready(uint64_t op, Clock::time_point now) const;
  // The sequence was admitted with `matched_len` cached tokens (or ended: 0). Drops the
  // operation's lock; returns how many of those tokens the operation loaded.
  size_t Release(uint64_t op, size_t matched_len);
  // Takes finished I/O, inserts completed loads. Call every engine loop.
  void Poll();
  // Drops every lock operations hold (before the RAM cache is flushed).
  void UnlockAll();

  // New weights: stored blocks of the old ones are never matched again; loads in flight are
  // discarded.
  void SetModelTag(uint64_t tag);
  // /clear_hicache_storage_backend: deletes every stored block.
  void ClearStorage();
  // Called on the I/O thread when a read or write finishes (to wake the engine thread).
  void set_notifier(std::function<void()> notifier) { store_->set_notifier(std::move(notifier)); }

  HiCacheStats stats() const;
  const HiCacheOptions& options() const { return options_; }
  DiskKvStore& store() { return *store_; }

 private:
  HiCache(const HiCacheOptions& options, RadixCache* cache, TokenToKVPool* pool,
          std::unique_ptr<DiskKvStore> store);

  struct Load {  // one block read, shared by the operations that want it
    int refs = 0;
    bool done = false;
    bool ok = false;
    KvBlock block;
  };
  struct Op {
    std::vector<int32_t> tokens;  // the prefix up to the last block to load
    std::string extra_key;
    size_t first_block = 0;
    std::vector<uint64_t> hashes;  // of blocks [first_block, first_block + hashes.size())
    uint64_t parent = 0;           // key before the first block
    Clock::time_point start;
    Clock::time_point deadline;
    bool finished = false;
    bool released = false;
    bool stale = false;  // the model changed: nothing is inserted
    RadixNode* locked = nullptr;
    size_t loaded_from = 0;  // tokens [loaded_from, loaded_end) came from storage
    size_t loaded_end = 0;
  };

  // Stores the blocks whose last token lies in `node` (see the header comment).
  void Backup(RadixNode& node);
  void Finish(Op& op);
  void InsertLoaded(Op& op, size_t blocks);
  void DropRefs(const Op& op);
  size_t payload_bytes() const;

  HiCacheOptions options_;
  RadixCache* cache_;
  TokenToKVPool* pool_;
  std::unique_ptr<DiskKvStore> store_;
  std::unordered_map<uint64_t, Load> loads_;
  std::unordered_map<uint64_t, Op> ops_;
  uint64_t next_op_ = 1;
  size_t locked_tokens_ = 0;
  bool inserting_loaded_ = false;
  HiCacheStats stats_;
};

}  // namespace radixserve::kv

#include "kv/hicache.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "common/log.h"
#include "kv/kv_block_hash.h"
#include "kv/kv_rows.h"

namespace radixserve::kv {
namespace {

// Tokens of the path from the root to `node` and their slots, in order.
void PathOf(const RadixNode& node, std::vector<int32_t>* tokens, std::vector<int32_t>* slots) {
  std::vector<const RadixNode*> path;
  for (const RadixNode* n = &node; n->parent != nullptr; n = n->parent) path.push_back(n);
  tokens->clear();
  slots->clear();
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    tokens->insert(tokens->end(), (*it)->key.begin(), (*it)->key.end());
    slots->insert(slots->end(), (*it)->value.begin(), (*it)->value.end());
  }
}

// Loads may keep at most this share of the pool locked for waiting sequences.
constexpr size_t kMaxLockedShareDivisor = 2;

}  // namespace

Expected<HiCacheWritePolicy> ParseHiCacheWritePolicy(std::string_view name) {
  if (name == "write_through") return HiCacheWritePolicy::kWriteThrough;
  if (name == "write_through_selective") return HiCacheWritePolicy::kWriteThroughSelective;
  if (name == "write_back") return HiCacheWritePolicy::kWriteBack;
  return InvalidArgument("unknown --hicache-write-policy: " + std::string(name));
}

Expected<HiCachePrefetchPolicy> ParseHiCachePrefetchPolicy(std::string_view name) {
  if (name == "best_effort") return HiCachePrefetchPolicy::kBestEffort;
  if (name == "wait_complete") return HiCachePrefetchPolicy::kWaitComplete;
  if (name == "timeout") return HiCachePrefetchPolicy::kTimeout;
  return InvalidArgument("unknown --hicache-storage-prefetch-policy: " + std::string(name));
}

HiCache::HiCache(const HiCacheOptions& options, RadixCache* cache, TokenToKVPool* pool,
                 std::unique_ptr<DiskKvStore> store)
    : options_(options), cache_(cache), pool_(pool), store_(std::move(store)) {}

Expected<std::unique_ptr<HiCache>> HiCache::Create(const HiCacheOptions& options, RadixCache* cache,
                                                   TokenToKVPool* pool) {
  RADIX_CHECK(cache != nullptr && pool != nullptr);
  if (options.block_tokens == 0 ||
      options.block_tokens % static_cast<size_t>(pool->page_size()) != 0) {
    return InvalidArgument("hierarchical cache blocks must be a multiple of --page-size");
  }
  DiskKvStoreOptions store_options;
  store_options.directory = options.directory;
  store_options.capacity_bytes = options.capacity_bytes;
  if (store_options.capacity_bytes == 0) {
    const double pool_bytes = static_cast<double>(pool->size()) *
                              static_cast<double>(pool->storage().row_bytes()) * 2.0 *
                              static_cast<double>(pool->storage().spec().num_layers);
    store_options.capacity_bytes = static_cast<uint64_t>(options.capacity_ratio * pool_bytes);
  }
  store_options.model_tag = options.model_tag;
  store_options.block_tokens = options.block_tokens;
  const KvStorage& storage = pool->storage();
  store_options.payload_bytes = options.block_tokens * storage.row_bytes() * 2 *
                                static_cast<size_t>(storage.spec().num_layers);
  RADIX_ASSIGN_OR_RETURN(std::unique_ptr<DiskKvStore> store, DiskKvStore::Open(store_options));
  std::unique_ptr<HiCache> hicache(new HiCache(options, cache, pool, std::move(store)));
  cache->set_observer(hicache.get());
  return hicache;
}

HiCache::~HiCache() { cache_->set_observer(nullptr); }

size_t HiCache::payload_bytes() const { return store_->options().payload_bytes; }

void HiCache::Backup(RadixNode& node) {
  if (node.disk_backed) return;
  node.disk_backed = true;
  if (options_.persistable && !options_.persistable(node.extra_key)) return;
  const size_t b = options_.block_tokens;
  std::vector<int32_t> tokens;
  std::vector<int32_t> slots;
  PathOf(node, &tokens, &slots);
  const size_t end = tokens.size();
  const size_t start = end - node.key.size();
  const size_t first = start / b;
  const size_t last = end / b;  // exclusive
  if (first >= last) return;
  const uint64_t seed = BlockChainSeed(store_->options().model_tag, node.extra_key);
  const std::vector<uint64_t> hashes = BlockHashes(seed, std::span(tokens).first(last * b), b);
  size_t missing = 0;
  for (size_t i = first; i < last; ++i) missing += store_->Has(hashes[i]) ? 0 : 1;
  if (!store_->CanQueue(missing * payload_bytes())) {
    store_->CountDropped(missing);
    node.disk_backed = false;  // the write queue is full: try again on a later event
    return;
  }
  if (missing > 0) stats_.backup_pgs.Observe(static_cast<double>(missing));
  // Deepest block first: the store's LRU order then evicts a chain from its end, never leaving
  // later blocks whose prefix is gone.
  for (size_t i = last; i-- > first;) {
    if (store_->Has(hashes[i])) continue;
    auto payload = std::make_shared<std::vector<std::byte>>(payload_bytes());
    GatherRows(pool_->storage(), std::span(slots).subspan(i * b, b), payload->data());
    KvBlock block;
    block.hash = hashes[i];
    block.parent_hash = i == 0 ? seed : hashes[i - 1];
    block.tokens.assign(tokens.begin() + static_cast<ptrdiff_t>(i * b),
                        tokens.begin() + static_cast<ptrdiff_t>((i + 1) * b));
    block.extra_key = node.extra_key;
    block.payload = std::move(payload);
    RADIX_CHECK(store_->Write(std::move(block)));
  }
}

void HiCache::OnInsert(RadixNode& node) {
  if (inserting_loaded_) {
    node.disk_backed = true;  // it came from storage
    return;
  }
  if (options_.write_policy == HiCacheWritePolicy::kWriteThrough) Backup(node);
}

void HiCache::OnHit(RadixNode& node) {
  if (options_.write_policy == HiCacheWritePolicy::kWriteThroughSelective && node.hit_count >= 2) {
    Backup(node);
  }
}

void HiCache::OnEvict(RadixNode& leaf) {
  if (options_.write_policy == HiCacheWritePolicy::kWriteBack) Backup(leaf);
}

uint64_t HiCache::Prefetch(std::span<const int32_t> tokens, std::string_view extra_key) {
  if (options_.persistable && !options_.persistable(extra_key)) return 0;
  const size_t b = options_.block_tokens;
  const size_t blocks = tokens.size() / b;
  if (blocks == 0) return 0;
  const size_t matched = cache_->PeekMatchLength(CacheKey{tokens, extra_key});
  const size_t first = matched / b;
  if (first >= blocks) return 0;
  const uint64_t seed = BlockChainSeed(store_->options().model_tag, extra_key);
  const std::vector<uint64_t> hashes = BlockHashes(seed, tokens.first(blocks * b), b);
  size_t last = first;
  while (last < blocks && (store_->Contains(hashes[last]) || loads_.count(hashes[last]) != 0)) {
    ++last;
  }
  const size_t new_tokens = last * b - matched;
  if (last == first || new_tokens < options_.prefetch_threshold) return 0;

  const uint64_t id = next_op_++;
  Op& op = ops_[id];
  op.tokens.assign(tokens.begin(), tokens.begin() + static_cast<ptrdiff_t>(last * b));
  op.extra_key = std::string(extra_key);
  op.first_block = first;
  op.hashes.assign(hashes.begin() + static_cast<ptrdiff_t>(first),
                   hashes.begin() + static_cast<ptrdiff_t>(last));
  op.parent = first == 0 ? seed : hashes[first - 1];
  const double timeout = options_.prefetch_timeout_base + options_.prefetch_timeout_per_ki_token *
                                                              static_cast<double>(new_tokens) /
                                                              1024.0;
  op.start = Clock::now();
  op.deadline = op.start +
                std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout));
  for (auto it = op.hashes.rbegin(); it != op.hashes.rend(); ++it) {  // deepest first (LRU)
    Load& load = loads_[*it];
    if (load.refs++ == 0) store_->Read(*it);
  }
  ++stats_.prefetch_ops;
  return id;
}

bool HiCache::Ready(uint64_t id, Clock::time_point now) const {
  auto it = ops_.find(id);
  if (it == ops_.end() || it->second.finished) return true;
  switch (options_.prefetch_policy) {
    case HiCachePrefetchPolicy::kBestEffort:
      return true;
    case HiCachePrefetchPolicy::kWaitComplete:
      return false;
    case HiCachePrefetchPolicy::kTimeout:
      return now >= it->second.deadline;
  }
  return true;
}

size_t HiCache::Release(uint64_t id, size_t matched_len) {
  auto it = ops_.find(id);
  if (it == ops_.end()) return 0;
  Op& op = it->second;
  size_t hit = 0;
  if (op.loaded_end > op.loaded_from && matched_len > op.loaded_from) {
    hit = std::min(matched_len, op.loaded_end) - op.loaded_from;
  }
  stats_.storage_hit_tokens += hit;
  if (op.locked != nullptr) {
    cache_->DecLockRef(op.locked);
    locked_tokens_ -= op.loaded_end;
    op.locked = nullptr;
  }
  op.released = true;
  if (op.finished) ops_.erase(it);
  return hit;
}

void HiCache::UnlockAll() {
  for (auto& [id, op] : ops_) {
    if (op.locked == nullptr) continue;
    cache_->DecLockRef(op.locked);
    locked_tokens_ -= op.loaded_end;
    op.locked = nullptr;
  }
}

void HiCache::Poll() {
  double written_bytes = 0.0;
  double write_seconds = 0.0;
  for (DiskKvStore::Completed& done : store_->TakeCompleted()) {
    if (done.is_write) {
      if (done.ok) {
        stats_.backuped_tokens += options_.block_tokens;
        written_bytes += static_cast<double>(payload_bytes());
        write_seconds += done.seconds;
      }
      continue;
    }
    auto it = loads_.find(done.block.hash);
    if (it == loads_.end()) continue;
    it->second.done = true;
    it->second.ok = done.ok;
    it->second.block = std::move(done.block);
  }
  if (write_seconds > 0) stats_.backup_bandwidth.Observe(written_bytes / write_seconds / 1e9);
  for (auto it = ops_.begin(); it != ops_.end();) {
    Op& op = it->second;
    if (!op.finished && std::all_of(op.hashes.begin(), op.hashes.end(),
                                    [this](uint64_t h) { return loads_.at(h).done; })) {
      Finish(op);
    }
    if (op.finished && op.released) {
      it = ops_.erase(it);
    } else {
      ++it;
    }
  }
}

void HiCache::Finish(Op& op) {
  op.finished = true;
  size_t good = 0;
  uint64_t parent = op.parent;
  const size_t b = options_.block_tokens;
  for (size_t i = 0; i < op.hashes.size() && !op.stale; ++i) {
    const Load& load = loads_.at(op.hashes[i]);
    const auto expected = std::span(op.tokens).subspan((op.first_block + i) * b, b);
    if (!load.ok || load.block.parent_hash != parent || load.block.extra_key != op.extra_key ||
        !std::equal(expected.begin(), expected.end(), load.block.tokens.begin(),
                    load.block.tokens.end())) {
      break;
    }
    parent = op.hashes[i];
    ++good;
  }
  if (good > 0) {
    const double seconds = std::chrono::duration<double>(Clock::now() - op.start).count();
    stats_.prefetch_pgs.Observe(static_cast<double>(good));
    if (seconds > 0) {
      stats_.prefetch_bandwidth.Observe(static_cast<double>(good * payload_bytes()) / seconds /
                                        1e9);
    }
    InsertLoaded(op, good);
  }
  DropRefs(op);
}

void HiCache::DropRefs(const Op& op) {
  for (const uint64_t hash : op.hashes) {
    auto it = loads_.find(hash);
    if (--it->second.refs == 0) loads_.erase(it);
  }
}

void HiCache::InsertLoaded(Op& op, size_t blocks) {
  const size_t b = options_.block_tokens;
  const size_t begin = op.first_block * b;
  const size_t end = begin + blocks * b;
  const CacheKey key{std::span(op.tokens).first(end), op.extra_key};
  // Only a continuation of what RAM holds: a match shorter than `begin` means the RAM part was
  // evicted meanwhile. The inserted nodes are marked disk-backed (OnInsert), not written back.
  inserting_loaded_ = true;
  const PrefixExtension ext = ExtendCachedPrefix(
      *cache_, *pool_, key, begin, [&](size_t matched, std::span<const int32_t> slots) {
        for (size_t pos = matched; pos < end;) {
          const size_t block = pos / b;
          const size_t offset = pos % b;
          const size_t count = std::min(b - offset, end - pos);
          const Load& load = loads_.at(op.hashes[block - op.first_block]);
          ScatterRows(pool_->storage(), load.block.payload->data(), b, offset,
                      slots.subspan(pos - matched, count));
          pos += count;
        }
      });
  inserting_loaded_ = false;
  if (ext.node == nullptr) return;
  if (ext.matched >= end) {  // another load (or a computation) got there first
    cache_->DecLockRef(ext.node);
    return;
  }
  const bool lock = !op.released && locked_tokens_ + end <= pool_->size() / kMaxLockedShareDivisor;
  if (lock) {
    op.locked = ext.node;  // keeps the caller's lock
    locked_tokens_ += end;
  } else {
    cache_->DecLockRef(ext.node);
  }
  op.loaded_from = ext.matched;
  op.loaded_end = end;
  stats_.prefetched_tokens += end - ext.matched;
}

void HiCache::SetModelTag(uint64_t tag) {
  options_.model_tag = tag;
  store_->SetModelTag(tag);
  for (auto& [id, op] : ops_) op.stale = true;
}

void HiCache::ClearStorage() { store_->Clear(); }

void BucketCounts::Observe(double value) {
  const size_t bucket =
      static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  ++counts[bucket];
  sum += value;
  ++count;
}

void BucketCounts::Add(const BucketCounts& other) {
  if (counts.size() != other.counts.size()) return;
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  sum += other.sum;
  count += other.count;
}

void HiCacheStats::Add(const HiCacheStats& o) {
  store.files += o.store.files;
  store.bytes += o.store.bytes;
  store.written_blocks += o.store.written_blocks;
  store.read_blocks += o.store.read_blocks;
  store.failed_writes += o.store.failed_writes;
  store.failed_reads += o.store.failed_reads;
  store.dropped_writes += o.store.dropped_writes;
  store.evicted_files += o.store.evicted_files;
  backuped_tokens += o.backuped_tokens;
  prefetched_tokens += o.prefetched_tokens;
  prefetch_ops += o.prefetch_ops;
  storage_hit_tokens += o.storage_hit_tokens;
  prefetch_pgs.Add(o.prefetch_pgs);
  backup_pgs.Add(o.backup_pgs);
  prefetch_bandwidth.Add(o.prefetch_bandwidth);
  backup_bandwidth.Add(o.backup_bandwidth);
}

HiCacheStats HiCache::stats() const {
  HiCacheStats out = stats_;
  out.store = store_->stats();
  return out;
}

}  // namespace radixserve::kv

// KvMemory: the KV memory of one engine replica built in one step: sizing (memory_sizing.h),
// the TokenToKVPool, the ReqToTokenPool and the prefix cache (RadixCache, or ChunkCache with
// --disable-radix-cache), plus the few memory questions the scheduler asks every step.
//
// Request-pool sizing follows SGLang: rows = --max-running-requests if given, else
// clamp(int(max_total_num_tokens / context_len * 512), 2048, 4096); each row holds
// context_len + 4 positions. The effective max_running_requests is
// min(--max-running-requests or max_total_num_tokens / 2, rows).
//
// Thread affinity: engine thread only. The object is not movable: the cache points at the pools.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/status.h"
#include "kv/eviction_policy.h"
#include "kv/hicache.h"
#include "kv/kv_dtype.h"
#include "kv/memory_sizing.h"
#include "kv/prefix_cache.h"
#include "kv/radix_cache.h"
#include "kv/req_to_token_pool.h"
#include "kv/token_to_kv_pool.h"

namespace radixserve::kv {

struct KvMemoryOptions {
  // Model geometry (per replica / TP rank).
  int32_t num_layers = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  KvDtype dtype = KvDtype::kF32;
  KvScales scales;              // fp8 only (KvStorageSpec)
  bool values_in_keys = false;  // MLA: one buffer per layer (KvStorageSpec)
  int64_t context_len = 0;
  // Server arguments.
  int32_t page_size = 1;
  std::optional<int64_t> max_total_tokens;
  std::optional<double> mem_fraction_static;
  std::optional<int64_t> max_running_requests;
  bool disable_radix_cache = false;
  EvictionPolicy eviction_policy = EvictionPolicy::kLru;
  // Resident bytes of the loaded weights, charged against the static budget.
  uint64_t weights_bytes = 0;
  // Data-parallel replicas sharing the weights and splitting the KV budget (memory_sizing.h).
  int32_t replicas = 1;
  // The storage tier under the radix cache (--enable-hierarchical-cache with a storage backend).
  std::optional<HiCacheOptions> hicache;
  // Host memory to size against; nullopt reads this machine (ReadHostMemory).
  std::optional<HostMemory> memory;
  // A draft model's KV (--speculative-algorithm STANDALONE, or NEXTN's one block): a second
  // storage with a row for every slot of the pool (the draft's K/V of a token lives at the
  // target's slot) plus `draft_scratch_rows` rows after them for the draft's own steps. Its bytes
  // per token, and the state_bytes per token the draft keeps beside (NEXTN: the target's hidden
  // state, spec/draft_runner.h), count in the sizing. Same dtype as the target's, without fp8
  // scales.
  struct DraftGeometry {
    int32_t num_layers = 0;
    int32_t kv_heads = 0;
    int32_t head_dim = 0;
    bool values_in_keys = false;
    int64_t state_bytes = 0;
  };
  std::optional<DraftGeometry> draft;
  size_t draft_scratch_rows = 0;
};

class KvMemory {
 public:
  // kInvalidArgument for bad geometry or limits, kResourceExhausted when memory is too small.
  // Logs SGLang's "KV Cache is allocated" line.
  static Expected<std::unique_ptr<KvMemory>> Create(const KvMemoryOptions& options);

  KvMemory(const KvMemory&) = delete;
  KvMemory& operator=(const KvMemory&) = delete;

  TokenToKVPool& pool() { return *pool_; }
  const TokenToKVPool& pool() const { return *pool_; }
  ReqToTokenPool& req_pool() { return *req_pool_; }
  const ReqToTokenPool& req_pool() const { return *req_pool_; }
  PrefixCache& cache() { return *cache_; }
  const PrefixCache& cache() const { return *cache_; }
  // The radix cache, or nullptr when the radix cache is disabled.
  RadixCache* radix_cache() { return radix_; }
  // The draft model's KV storage (KvMemoryOptions::draft), or nullptr; its first rows match the
  // pool's storage rows, the scratch rows follow (draft_scratch_row()).
  KvStorage* draft_storage() { return draft_storage_.get(); }
  size_t draft_scratch_row() const { return pool_->storage().spec().num_rows; }
  // The storage tier, or nullptr when off.
  HiCache* hicache() { return hicache_.get(); }
  const HiCache* hicache() const { return hicache_.get(); }

  const KvSizing& sizing() const { return sizing_; }
  size_t max_total_num_tokens() const { return pool_->size(); }
  int64_t max_running_requests() const { return max_running_requests_; }

  // AllocExtend, first evicting the shortfall from unlocked cache when the free pages do not
  // suffice (SGLang evicts the whole need; the shortfall is enough). All or nothing;
  // kResourceExhausted when even a full eviction leaves too little.
  Expected<std::vector<int32_t>> AllocExtendEvicting(std::span<const ExtendSpec> specs);

  // Tokens neither free nor evictable (live sequences plus locked cache): SGLang's "#token".
  size_t used_tokens() const;
  // used_tokens / max_total_num_tokens: SGLang's "token usage".
  double token_usage() const;
  // Free plus evictable: what admission may count on.
  size_t allocatable_tokens() const;

  // The idle leak check (leak_check.h) over all three structures.
  Status CheckIdle() const;
  // /flush_cache: only when no request holds a row and nothing is locked; then every cached
  // entry is dropped, all slots are free and the KV pages go back to the OS (RSS falls).
  // kResourceExhausted (nothing changed) otherwise.
  Status Flush();

 private:
  KvMemory() = default;

  KvSizing sizing_;
  int64_t max_running_requests_ = 0;
  std::unique_ptr<TokenToKVPool> pool_;
  std::unique_ptr<ReqToTokenPool> req_pool_;
  std::unique_ptr<PrefixCache> cache_;
  RadixCache* radix_ = nullptr;
  std::unique_ptr<HiCache> hicache_;  // destroyed before the cache it observes
  std::unique_ptr<KvStorage> draft_storage_;
};

}  // namespace radixserve::kv

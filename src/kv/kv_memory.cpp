#include "kv/kv_memory.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "common/log.h"
#include "kv/chunk_cache.h"
#include "kv/kv_storage.h"
#include "kv/leak_check.h"

namespace radixserve::kv {

namespace {

constexpr int64_t kMinReqPoolSize = 2048;
constexpr int64_t kMaxReqPoolSize = 4096;
constexpr int64_t kRowHeadroom = 4;

}  // namespace

Expected<std::unique_ptr<KvMemory>> KvMemory::Create(const KvMemoryOptions& options) {
  if (options.num_layers <= 0 || options.kv_heads <= 0 || options.head_dim <= 0) {
    return InvalidArgument("KV geometry needs positive layers, kv heads and head dim");
  }
  if (options.context_len <= 0) return InvalidArgument("context length must be positive");
  if (options.page_size < 1) return InvalidArgument("--page-size must be at least 1");
  if (options.max_running_requests && *options.max_running_requests <= 0) {
    return InvalidArgument("--max-running-requests must be positive");
  }

  HostMemory memory;
  if (options.memory) {
    memory = *options.memory;
  } else {
    RADIX_ASSIGN_OR_RETURN(memory, StartupHostMemory());
  }
  KvSizingInput input;
  input.kv_bytes_per_token = KvBytesPerToken(options.num_layers, options.kv_heads, options.head_dim,
                                             options.dtype, options.values_in_keys);
  if (options.draft) {
    input.kv_bytes_per_token +=
        KvBytesPerToken(options.draft->num_layers, options.draft->kv_heads, options.draft->head_dim,
                        options.dtype, options.draft->values_in_keys) +
        options.draft->state_bytes;
  }
  input.memory = memory;
  input.weights_bytes = options.weights_bytes;
  input.mem_fraction_static = options.mem_fraction_static;
  input.max_total_tokens = options.max_total_tokens;
  input.page_size = options.page_size;
  input.replicas = options.replicas;
  RADIX_ASSIGN_OR_RETURN(KvSizing sizing, ComputeKvSizing(input));

  const auto max_total = static_cast<int64_t>(sizing.max_total_num_tokens);
  const int64_t req_pool_size =
      options.max_running_requests
          ? *options.max_running_requests
          : std::clamp<int64_t>(
                static_cast<int64_t>(static_cast<double>(max_total) /
                                     static_cast<double>(options.context_len) * 512),
                kMinReqPoolSize, kMaxReqPoolSize);
  const int64_t running =
      std::min(options.max_running_requests.value_or(max_total / 2), req_pool_size);
  if (running <= 0) {
    return Status(StatusCode::kResourceExhausted,
                  "max_running_requests would be 0 with max_total_num_tokens=" +
                      std::to_string(max_total) + "; increase --max-total-tokens");
  }

  RADIX_LOG_INFO(
      "KV pool sizing: available_cpu_mem={:.2f} GB, mem_fraction_static={:.3f}, weights={:.2f} GB, "
      "bytes/token={}, max_total_num_tokens={}, req_pool_size={}, max_running_requests={}",
      static_cast<double>(sizing.available_bytes) / (1 << 30), sizing.mem_fraction_static,
      static_cast<double>(options.weights_bytes) / (1 << 30), input.kv_bytes_per_token, max_total,
      req_pool_size, running);

  // The request-to-token table holds a full-context row per request slot; a huge
  // --max-running-requests would otherwise die in the allocation.
  const uint64_t table_bytes = static_cast<uint64_t>(req_pool_size) *
                               static_cast<uint64_t>(options.context_len + kRowHeadroom) *
                               sizeof(int32_t);
  if (memory.available_bytes > 0 && table_bytes > memory.available_bytes / 2) {
    return InvalidArgument(fmt::format(
        "argument --max-running-requests: {} request slots of {} tokens need a {:.1f} GB "
        "request-to-token table, more than half of the {:.1f} GB of available memory; lower "
        "--max-running-requests or --context-length",
        req_pool_size, options.context_len, static_cast<double>(table_bytes) / (1 << 30),
        static_cast<double>(memory.available_bytes) / (1 << 30)));
  }

  TokenToKVPoolOptions pool_options;
  pool_options.size = sizing.max_total_num_tokens;
  pool_options.page_size = options.page_size;
  pool_options.num_layers = options.num_layers;
  pool_options.kv_heads = options.kv_heads;
  pool_options.head_dim = options.head_dim;
  pool_options.dtype = options.dtype;
  pool_options.scales = options.scales;
  pool_options.values_in_keys = options.values_in_keys;
  RADIX_ASSIGN_OR_RETURN(TokenToKVPool pool, TokenToKVPool::Create(pool_options));

  std::unique_ptr<KvMemory> memory_pools(new KvMemory());
  memory_pools->sizing_ = sizing;
  memory_pools->max_running_requests_ = running;
  memory_pools->pool_ = std::make_unique<TokenToKVPool>(std::move(pool));
  if (options.draft) {
    KvStorageSpec spec;
    spec.num_layers = options.draft->num_layers;
    spec.kv_heads = options.draft->kv_heads;
    spec.head_dim = options.draft->head_dim;
    spec.values_in_keys = options.draft->values_in_keys;
    spec.dtype = options.dtype;
    spec.num_rows = memory_pools->draft_scratch_row() + options.draft_scratch_rows;
    RADIX_ASSIGN_OR_RETURN(KvStorage draft, KvStorage::Create(spec));
    memory_pools->draft_storage_ = std::make_unique<KvStorage>(std::move(draft));
  }
  Expected<std::unique_ptr<ReqToTokenPool>> req_pool = ReqToTokenPool::Create(
      static_cast<size_t>(req_pool_size), static_cast<size_t>(options.context_len + kRowHeadroom));
  if (!req_pool.ok()) {
    return InvalidArgument("argument --max-running-requests: " + req_pool.status().message() +
                           "; lower --max-running-requests or --context-length");
  }
  memory_pools->req_pool_ = std::move(req_pool).value();
  if (options.disable_radix_cache) {
    memory_pools->cache_ =
        std::make_unique<ChunkCache>(memory_pools->pool_.get(), memory_pools->req_pool_.get());
  } else {
    auto radix =
        std::make_unique<RadixCache>(memory_pools->pool_.get(), memory_pools->req_pool_.get(),
                                     RadixCacheOptions{options.page_size, options.eviction_policy});
    memory_pools->radix_ = radix.get();
    memory_pools->cache_ = std::move(radix);
  }
  if (options.hicache) {
    if (memory_pools->radix_ == nullptr) {
      return InvalidArgument(
          "argument --enable-hierarchical-cache: needs the radix cache (drop "
          "--disable-radix-cache)");
    }
    Expected<std::unique_ptr<HiCache>> hicache =
        HiCache::Create(*options.hicache, memory_pools->radix_, memory_pools->pool_.get());
    if (!hicache.ok()) {
      return Status(hicache.status().code(),
                    "argument --hicache-storage-backend: " + hicache.status().message());
    }
    memory_pools->hicache_ = std::move(hicache).value();
  }
  return memory_pools;
}

Expected<std::vector<int32_t>> KvMemory::AllocExtendEvicting(std::span<const ExtendSpec> specs) {
  const size_t need = pool_->PagesNeeded(specs) * static_cast<size_t>(pool_->page_size());
  if (pool_->available_size() < need) cache_->Evict(need - pool_->available_size());
  return pool_->AllocExtend(specs);
}

size_t KvMemory::used_tokens() const {
  return pool_->size() - pool_->available_size() - cache_->EvictableSize();
}

double KvMemory::token_usage() const {
  return static_cast<double>(used_tokens()) / static_cast<double>(pool_->size());
}

size_t KvMemory::allocatable_tokens() const {
  return pool_->available_size() + cache_->EvictableSize();
}

Status KvMemory::CheckIdle() const { return CheckKvLeak(*pool_, *cache_, req_pool_.get()); }

Status KvMemory::Flush() {
  // Loaded blocks kept for waiting sequences are not theirs yet: they go with the rest.
  if (hicache_) hicache_->UnlockAll();
  const size_t rows_in_use = req_pool_->size() - req_pool_->available_size();
  if (rows_in_use > 0 || cache_->ProtectedSize() > 0) {
    return Status(
        StatusCode::kResourceExhausted,
        "cache not flushed: " + std::to_string(rows_in_use) + " requests still hold KV memory");
  }
  RADIX_RETURN_IF_ERROR(cache_->Reset());
  pool_->Clear();
  req_pool_->Clear();
  // Nothing holds KV data now: give the pages back instead of keeping the peak resident.
  pool_->storage().ReleaseMemory();
  if (draft_storage_) draft_storage_->ReleaseMemory();
  return Status::Ok();
}

}  // namespace radixserve::kv

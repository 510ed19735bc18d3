#include "kv/chunk_cache.h"

namespace radixserve::kv {

ChunkCache::ChunkCache(TokenToKVPool* pool, ReqToTokenPool* req_pool)
    : pool_(pool), req_pool_(req_pool) {
  RADIX_CHECK(pool_ != nullptr && req_pool_ != nullptr);
}

MatchResult ChunkCache::MatchPrefix(const CacheKey& /*key*/) { return MatchResult{}; }

void ChunkCache::CacheUnfinishedSeq(SeqKvState& state, const CacheKey& tokens) {
  RADIX_CHECK(state.req_pool_slot >= 0);
  const std::span<const int32_t> kv =
      req_pool_->Slice(state.req_pool_slot, 0, tokens.tokens.size());
  state.prefix_indices.assign(kv.begin(), kv.end());
}

void ChunkCache::CacheFinishedSeq(SeqKvState& state, const CacheKey& tokens, bool /*insert*/) {
  RADIX_CHECK(state.req_pool_slot >= 0);
  RADIX_CHECK_MSG(state.cache_protected_len == 0 && state.last_node == nullptr,
                  "ChunkCache sequence claims a cached prefix");
  pool_->Free(req_pool_->Slice(state.req_pool_slot, 0, tokens.tokens.size()));
  req_pool_->Free(state.req_pool_slot);
  state = SeqKvState{};
}

size_t ChunkCache::Evict(size_t /*num_tokens*/) { return 0; }

void ChunkCache::IncLockRef(RadixNode* node) {
  RADIX_CHECK_MSG(node == nullptr, "ChunkCache has no nodes to lock");
}

void ChunkCache::DecLockRef(RadixNode* node) {
  RADIX_CHECK_MSG(node == nullptr, "ChunkCache has no nodes to unlock");
}

void ChunkCache::CollectCachedSlots(std::vector<int32_t>* /*out*/) const {}

}  // namespace radixserve::kv

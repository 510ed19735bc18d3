// ChunkCache: the PrefixCache used with `--disable-radix-cache`. Nothing is shared between
// sequences: MatchPrefix is always empty and nothing is ever cached or evictable. Between prefill
// chunks a sequence's own KV becomes its prefix; on finish all its KV and its request slot are
// freed. Locks are no-ops (match results carry no node).
//
// Thread affinity: engine thread only.
#pragma once

#include "kv/prefix_cache.h"
#include "kv/req_to_token_pool.h"
#include "kv/token_to_kv_pool.h"

namespace radixserve::kv {

class ChunkCache final : public PrefixCache {
 public:
  // pool and req_pool are borrowed and must outlive the cache.
  ChunkCache(TokenToKVPool* pool, ReqToTokenPool* req_pool);

  MatchResult MatchPrefix(const CacheKey& key) override;
  void CacheUnfinishedSeq(SeqKvState& state, const CacheKey& tokens) override;
  void CacheFinishedSeq(SeqKvState& state, const CacheKey& tokens, bool insert) override;
  size_t Evict(size_t num_tokens) override;
  void IncLockRef(RadixNode* node) override;
  void DecLockRef(RadixNode* node) override;
  size_t EvictableSize() const override { return 0; }
  size_t ProtectedSize() const override { return 0; }
  Status Reset() override { return Status::Ok(); }
  bool disabled() const override { return true; }
  void CollectCachedSlots(std::vector<int32_t>* out) const override;

 private:
  TokenToKVPool* pool_;
  ReqToTokenPool* req_pool_;
};

}  // namespace radixserve::kv

// PrefixCache: the interface the scheduler uses to reuse KV across requests. RadixCache shares
// page-aligned prefixes through a radix tree; ChunkCache (`--disable-radix-cache`) shares nothing
// but keeps a chunked request's own KV between chunks.
//
// Protocol for one sequence (state in SeqKvState):
//   1. MatchPrefix(key) when the sequence is (re)admitted; the scheduler passes at most
//      len(fill_ids) - 1 tokens so at least one token is recomputed (SGLang's rule), and fewer
//      when input logprobs start earlier.
//   2. On admission: IncLockRef(result.last_node); state.last_node = result.last_node;
//      state.prefix_indices = result.device_indices; state.cache_protected_len = its size. The
//      engine allocates a ReqToTokenPool row, writes prefix_indices then the new slots into it.
//   3. After each prefill step of a sequence that is not finished (every chunk, and the last
//      prefill of a sequence that goes on decoding, as SGLang does so that concurrent requests can
//      share the prompt): CacheUnfinishedSeq(state, tokens computed so far).
//   4. On finish or abort: CacheFinishedSeq(state, tokens_with_kv, /*insert=*/true); on
//      retraction or preemption: insert=false.
//
// Ownership of KV slots in the sequence's row: positions [0, cache_protected_len) belong to the
// cache (locked through last_node); later positions belong to the sequence until a Cache*Seq call
// hands them over or frees them. Slots beyond tokens_with_kv are the caller's to free, except
// that with page_size > 1 the page holding position tokens_with_kv - 1 is freed whole.
//
// Thread affinity: engine thread only. Nothing here is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kv/seq_kv_state.h"

namespace radixserve::kv {

struct RadixNode;

// A lookup key: token ids plus a namespace (SGLang's extra_key: cache_salt, LoRA id). Different
// namespaces never share entries.
struct CacheKey {
  std::span<const int32_t> tokens;
  std::string_view extra_key = {};
};

struct MatchResult {
  // KV slots of the matched prefix, one per matched token; always a multiple of page_size long.
  std::vector<int32_t> device_indices;
  // Deepest node of the match (the root when nothing matched); nullptr for ChunkCache. Lock it
  // to protect the prefix from eviction.
  RadixNode* last_node = nullptr;

  size_t matched_len() const { return device_indices.size(); }
};

// How many leading tokens of a sequence's fill_ids (input + output so far) may come from the
// cache: all but the last, so that at least one token is computed and yields logits; and none at
// or after logprob_start_len when input logprobs are requested (their logits are needed).
inline size_t MaxPrefixMatchLen(size_t fill_len, std::optional<size_t> logprob_start_len = {}) {
  size_t limit = fill_len > 0 ? fill_len - 1 : 0;
  if (logprob_start_len && *logprob_start_len < limit) limit = *logprob_start_len;
  return limit;
}

class PrefixCache {
 public:
  virtual ~PrefixCache() = default;

  // Longest cached page-aligned prefix of key. May split a node; refreshes access times.
  virtual MatchResult MatchPrefix(const CacheKey& key) = 0;

  // See the protocol above. `tokens` are the sequence's tokens whose KV is in its row, from
  // position 0. Afterwards the state's prefix covers them (unfinished) or the state is reset
  // and its request slot freed (finished).
  virtual void CacheUnfinishedSeq(SeqKvState& state, const CacheKey& tokens) = 0;
  virtual void CacheFinishedSeq(SeqKvState& state, const CacheKey& tokens, bool insert) = 0;

  // Frees at least num_tokens tokens of unlocked cache if that much is evictable (else all of
  // it); returns the number freed.
  virtual size_t Evict(size_t num_tokens) = 0;

  // Lock / unlock the path from node to the root. nullptr is a no-op.
  virtual void IncLockRef(RadixNode* node) = 0;
  virtual void DecLockRef(RadixNode* node) = 0;

  virtual size_t EvictableSize() const = 0;  // cached tokens nobody locks
  virtual size_t ProtectedSize() const = 0;  // cached tokens some sequence locks
  size_t TotalSize() const { return EvictableSize() + ProtectedSize(); }

  // /flush_cache: drop every cached entry, returning its slots to the pool. Fails (and changes
  // nothing) while any entry is locked.
  virtual Status Reset() = 0;

  // True for caches that never share (ChunkCache): policies such as lpm fall back to fcfs.
  virtual bool disabled() const = 0;

  // Appends every KV slot the cache holds (for the leak check).
  virtual void CollectCachedSlots(std::vector<int32_t>* out) const = 0;
};

}  // namespace radixserve::kv

// RadixCache: SGLang's radix-tree prefix cache. Maps page-aligned token sequences to the KV slots
// that hold them so that requests sharing a prefix reuse its KV.
//
// Invariants (CheckInvariants verifies them):
//   * every non-root node's key is non-empty, a multiple of page_size long, as long as its value;
//   * a node's lock_ref is at least the sum of its children's (locks cover the path to the root);
//   * evictable_size = tokens in unlocked nodes, protected_size = tokens in locked nodes;
//   * every slot in a value is an allocated slot of the pool that no one else frees: the cache
//     owns it until eviction or Reset returns it.
// Unlocked leaves are kept in an ordered index by eviction key, so Evict costs O(k log n) for k
// evicted nodes rather than a walk over the whole tree per call.
// Access times come from a logical clock bumped by every MatchPrefix / Insert, so LRU order is
// the order of those calls.
//
// Matching truncates the key to a page multiple and compares whole pages. A match or insert that
// ends inside a node splits it; the new upper node inherits the lock count, so splitting never
// changes which tokens are protected.
//
// Constructed with pool == nullptr the tree only tracks tokens (values are opaque, nothing is
// freed): the scheduler's in-batch prefix check can use it as a simulated tree.
//
// Thread affinity: engine thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kv/eviction_policy.h"
#include "kv/prefix_cache.h"
#include "kv/radix_node.h"
#include "kv/req_to_token_pool.h"
#include "kv/token_to_kv_pool.h"

namespace radixserve::kv {

// Hooks for the hierarchical cache's storage tier (hicache.h). Called on the engine thread from
// inside RadixCache operations; an observer reads the node and its ancestors (keys, values,
// extra_key) and may set disk_backed, and must not call back into the cache.
class RadixCacheObserver {
 public:
  virtual ~RadixCacheObserver() = default;
  // Insert created this node; its slots hold the KV of its tokens.
  virtual void OnInsert(RadixNode& node) = 0;
  // MatchPrefix passed through this node (its hit_count was just incremented).
  virtual void OnHit(RadixNode& node) = 0;
  // Eviction is about to free this leaf's slots.
  virtual void OnEvict(RadixNode& leaf) = 0;
};

struct RadixCacheOptions {
  int32_t page_size = 1;
  EvictionPolicy eviction_policy = EvictionPolicy::kLru;
};

class RadixCache final : public PrefixCache {
 public:
  // pool and req_pool are borrowed and must outlive the cache; both may be nullptr for a
  // token-only tree (then Cache*Seq must not be called). page_size must equal the pool's.
  RadixCache(TokenToKVPool* pool, ReqToTokenPool* req_pool, const RadixCacheOptions& options);
  ~RadixCache() override;

  RadixCache(const RadixCache&) = delete;
  RadixCache& operator=(const RadixCache&) = delete;

  MatchResult MatchPrefix(const CacheKey& key) override;

  // Inserts key -> value (same length, a page multiple). Returns how many leading tokens were
  // already cached: the cache keeps its own slots for those, so value[0, result) stays with the
  // caller (who frees the ones it does not otherwise own), and takes ownership of value[result:].
  size_t Insert(const CacheKey& key, std::span<const int32_t> value);

  void CacheUnfinishedSeq(SeqKvState& state, const CacheKey& tokens) override;
  void CacheFinishedSeq(SeqKvState& state, const CacheKey& tokens, bool insert) override;

  size_t Evict(size_t num_tokens) override;
  void IncLockRef(RadixNode* node) override;
  void DecLockRef(RadixNode* node) override;

  size_t EvictableSize() const override { return evictable_size_; }
  size_t ProtectedSize() const override { return protected_size_; }

  Status Reset() override;
  bool disabled() const override { return false; }
  void CollectCachedSlots(std::vector<int32_t>* out) const override;

  // Length of the longest cached page-aligned prefix of key, without touching, splitting or
  // counting a hit (a read-only MatchPrefix).
  size_t PeekMatchLength(const CacheKey& key) const;

  // At most one observer; nullptr detaches it.
  void set_observer(RadixCacheObserver* observer) { observer_ = observer; }

  // Verifies the invariants listed above; the error names the first violation.
  Status CheckInvariants() const;

  const RadixNode* root() const { return root_.get(); }
  size_t node_count() const;
  int32_t page_size() const { return page_size_; }

 private:
  std::string ChildKey(std::string_view extra_key, std::span<const int32_t> tokens) const;
  size_t MatchLength(std::span<const int32_t> node_key, std::span<const int32_t> tokens) const;
  size_t AlignDown(size_t len) const { return len / page_size_ * page_size_; }
  // Splits child so that its first `len` tokens become a new parent node; returns that node.
  RadixNode* SplitNode(RadixNode* child, size_t len);
  void DeleteLeaf(RadixNode* leaf);
  // Index / Unindex bracket every change to a node's eviction key or leaf / lock state.
  using LeafEntry = std::tuple<int64_t, int64_t, RadixNode*>;
  LeafEntry LeafKey(RadixNode* node) const;
  bool IsEvictableLeaf(const RadixNode* node) const;
  void Index(RadixNode* node);
  void Unindex(RadixNode* node);
  void Touch(RadixNode* node, bool hit);
  // Follows `tokens` down from the root as far as whole pages match, splitting the last node
  // reached mid-key and touching each node (a cache hit when `hit`). Appends each node's slots to
  // `slots` when given. Returns the deepest node and the number of tokens matched.
  std::pair<RadixNode*, size_t> Descend(std::string_view extra_key, std::span<const int32_t> tokens,
                                        bool hit, std::vector<int32_t>* slots);
  void FreeSlots(std::span<const int32_t> slots);

  TokenToKVPool* pool_;
  ReqToTokenPool* req_pool_;
  int32_t page_size_;
  EvictionPolicy eviction_policy_;
  std::unique_ptr<RadixNode> root_;
  size_t evictable_size_ = 0;
  size_t protected_size_ = 0;
  uint64_t clock_ = 0;
  std::set<LeafEntry> evictable_leaves_;
  RadixCacheObserver* observer_ = nullptr;
};

}  // namespace radixserve::kv

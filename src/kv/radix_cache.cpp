#include "kv/radix_cache.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

namespace radixserve::kv {

RadixCache::RadixCache(TokenToKVPool* pool, ReqToTokenPool* req_pool,
                       const RadixCacheOptions& options)
    : pool_(pool),
      req_pool_(req_pool),
      page_size_(options.page_size),
      eviction_policy_(options.eviction_policy),
      root_(std::make_unique<RadixNode>()) {
  RADIX_CHECK(page_size_ >= 1);
  RADIX_CHECK_MSG(pool_ == nullptr || pool_->page_size() == page_size_,
                  "RadixCache page_size differs from the pool's");
  root_->lock_ref = 1;
}

RadixCache::~RadixCache() = default;

std::string RadixCache::ChildKey(std::string_view extra_key,
                                 std::span<const int32_t> tokens) const {
  const size_t page = std::min(tokens.size(), static_cast<size_t>(page_size_));
  const auto extra_len = static_cast<uint32_t>(extra_key.size());
  std::string out(sizeof(extra_len) + extra_key.size() + page * sizeof(int32_t), '\0');
  char* p = out.data();
  std::memcpy(p, &extra_len, sizeof(extra_len));
  if (!extra_key.empty()) std::memcpy(p + sizeof(extra_len), extra_key.data(), extra_key.size());
  std::memcpy(p + sizeof(extra_len) + extra_key.size(), tokens.data(), page * sizeof(int32_t));
  return out;
}

size_t RadixCache::MatchLength(std::span<const int32_t> node_key,
                               std::span<const int32_t> tokens) const {
  const size_t limit = std::min(node_key.size(), tokens.size());
  const auto first_difference =
      std::mismatch(node_key.begin(), node_key.begin() + limit, tokens.begin()).first;
  return AlignDown(static_cast<size_t>(first_difference - node_key.begin()));
}

RadixNode* RadixCache::SplitNode(RadixNode* child, size_t len) {
  RADIX_CHECK(len > 0 && len < child->key.size() && len % page_size_ == 0);
  RadixNode* parent = child->parent;
  const std::string key_in_parent = ChildKey(child->extra_key, child->key);

  auto upper = std::make_unique<RadixNode>();
  upper->key.assign(child->key.begin(), child->key.begin() + len);
  upper->value.assign(child->value.begin(), child->value.begin() + len);
  upper->extra_key = child->extra_key;
  upper->parent = parent;
  upper->lock_ref = child->lock_ref;
  upper->last_access = child->last_access;
  upper->creation = child->creation;
  upper->hit_count = child->hit_count;
  upper->disk_backed = child->disk_backed;

  child->key.erase(child->key.begin(), child->key.begin() + len);
  child->value.erase(child->value.begin(), child->value.begin() + len);
  child->parent = upper.get();

  std::unique_ptr<RadixNode> owned = std::move(parent->children.at(key_in_parent));
  RadixNode* raw_upper = upper.get();
  upper->children.emplace(ChildKey(child->extra_key, child->key), std::move(owned));
  parent->children[key_in_parent] = std::move(upper);
  return raw_upper;
}

RadixCache::LeafEntry RadixCache::LeafKey(RadixNode* node) const {
  const auto [primary, secondary] =
      EvictionKey(eviction_policy_, node->last_access, node->creation, node->hit_count);
  return {primary, secondary, node};
}

bool RadixCache::IsEvictableLeaf(const RadixNode* node) const {
  return node != root_.get() && node->children.empty() && node->lock_ref == 0;
}

void RadixCache::Index(RadixNode* node) {
  if (IsEvictableLeaf(node)) evictable_leaves_.insert(LeafKey(node));
}

void RadixCache::Unindex(RadixNode* node) {
  if (IsEvictableLeaf(node)) evictable_leaves_.erase(LeafKey(node));
}

void RadixCache::Touch(RadixNode* node, bool hit) {
  Unindex(node);
  node->last_access = clock_;
  if (hit) ++node->hit_count;
  Index(node);
}

std::pair<RadixNode*, size_t> RadixCache::Descend(std::string_view extra_key,
                                                  std::span<const int32_t> tokens, bool hit,
                                                  std::vector<int32_t>* slots) {
  RadixNode* node = root_.get();
  node->last_access = ++clock_;
  size_t pos = 0;
  while (pos < tokens.size()) {
    auto it = node->children.find(ChildKey(extra_key, tokens.subspan(pos)));
    if (it == node->children.end()) break;
    RadixNode* child = it->second.get();
    Touch(child, hit);
    const size_t len = MatchLength(child->key, tokens.subspan(pos));
    RADIX_CHECK(len > 0);
    if (len < child->key.size()) child = SplitNode(child, len);
    if (hit && observer_ != nullptr) observer_->OnHit(*child);
    if (slots != nullptr) slots->insert(slots->end(), child->value.begin(), child->value.end());
    node = child;
    pos += len;  // after a split the next page differs, so the next lookup misses
  }
  return {node, pos};
}

size_t RadixCache::PeekMatchLength(const CacheKey& key) const {
  const std::span<const int32_t> tokens = key.tokens.first(AlignDown(key.tokens.size()));
  const RadixNode* node = root_.get();
  size_t pos = 0;
  while (pos < tokens.size()) {
    auto it = node->children.find(ChildKey(key.extra_key, tokens.subspan(pos)));
    if (it == node->children.end()) break;
    const size_t len = MatchLength(it->second->key, tokens.subspan(pos));
    pos += len;
    if (len < it->second->key.size()) break;
    node = it->second.get();
  }
  return pos;
}

MatchResult RadixCache::MatchPrefix(const CacheKey& key) {
  MatchResult result;
  const std::span<const int32_t> tokens = key.tokens.first(AlignDown(key.tokens.size()));
  result.last_node = Descend(key.extra_key, tokens, /*hit=*/true, &result.device_indices).first;
  return result;
}

size_t RadixCache::Insert(const CacheKey& key, std::span<const int32_t> value) {
  RADIX_CHECK_MSG(key.tokens.size() == value.size(), "insert key and value lengths differ");
  RADIX_CHECK_MSG(key.tokens.size() % page_size_ == 0, "insert key is not page-aligned");
  const std::span<const int32_t> tokens = key.tokens;
  auto [node, pos] = Descend(key.extra_key, tokens, /*hit=*/false, nullptr);
  if (pos < tokens.size()) {
    auto leaf = std::make_unique<RadixNode>();
    leaf->key.assign(tokens.begin() + pos, tokens.end());
    leaf->value.assign(value.begin() + pos, value.end());
    leaf->extra_key = std::string(key.extra_key);
    leaf->parent = node;
    leaf->last_access = clock_;
    leaf->creation = clock_;
    evictable_size_ += leaf->key.size();
    RadixNode* raw_leaf = leaf.get();
    Unindex(node);  // no longer a leaf
    node->children.emplace(ChildKey(key.extra_key, leaf->key), std::move(leaf));
    Index(raw_leaf);
    if (observer_ != nullptr) observer_->OnInsert(*raw_leaf);
  }
  return pos;
}

void RadixCache::IncLockRef(RadixNode* node) {
  if (node == nullptr) return;
  for (; node != root_.get(); node = node->parent) {
    RADIX_CHECK(node != nullptr);
    if (node->lock_ref == 0) {
      Unindex(node);
      evictable_size_ -= node->key.size();
      protected_size_ += node->key.size();
    }
    ++node->lock_ref;
  }
}

void RadixCache::DecLockRef(RadixNode* node) {
  if (node == nullptr) return;
  for (; node != root_.get(); node = node->parent) {
    RADIX_CHECK(node != nullptr);
    RADIX_CHECK_MSG(node->lock_ref > 0, "unlocking a radix node that is not locked");
    --node->lock_ref;
    if (node->lock_ref == 0) {
      protected_size_ -= node->key.size();
      evictable_size_ += node->key.size();
      Index(node);
    }
  }
}

void RadixCache::FreeSlots(std::span<const int32_t> slots) {
  if (pool_ != nullptr) pool_->Free(slots);
}

void RadixCache::DeleteLeaf(RadixNode* leaf) {
  RADIX_CHECK(IsEvictableLeaf(leaf));
  if (observer_ != nullptr) observer_->OnEvict(*leaf);
  Unindex(leaf);
  FreeSlots(leaf->value);
  evictable_size_ -= leaf->key.size();
  RadixNode* parent = leaf->parent;
  parent->children.erase(ChildKey(leaf->extra_key, leaf->key));
  Index(parent);
}

size_t RadixCache::Evict(size_t num_tokens) {
  size_t freed = 0;
  while (freed < num_tokens && !evictable_leaves_.empty()) {
    RadixNode* leaf = std::get<RadixNode*>(*evictable_leaves_.begin());
    freed += leaf->key.size();
    DeleteLeaf(leaf);
  }
  return freed;
}

Status RadixCache::Reset() {
  if (protected_size_ > 0) {
    return Status(StatusCode::kResourceExhausted,
                  "cache not flushed: " + std::to_string(protected_size_) +
                      " cached tokens are locked by running requests");
  }
  std::vector<int32_t> slots;
  CollectCachedSlots(&slots);
  FreeSlots(slots);
  root_->children.clear();
  evictable_leaves_.clear();
  evictable_size_ = 0;
  return Status::Ok();
}

void RadixCache::CollectCachedSlots(std::vector<int32_t>* out) const {
  std::vector<const RadixNode*> stack{root_.get()};
  while (!stack.empty()) {
    const RadixNode* node = stack.back();
    stack.pop_back();
    out->insert(out->end(), node->value.begin(), node->value.end());
    for (const auto& [unused, child] : node->children) stack.push_back(child.get());
  }
}

size_t RadixCache::node_count() const {
  size_t count = 0;
  std::vector<const RadixNode*> stack{root_.get()};
  while (!stack.empty()) {
    const RadixNode* node = stack.back();
    stack.pop_back();
    ++count;
    for (const auto& [unused, child] : node->children) stack.push_back(child.get());
  }
  return count;
}

Status RadixCache::CheckInvariants() const {
  size_t evictable = 0;
  size_t protected_tokens = 0;
  size_t leaves = 0;
  std::vector<const RadixNode*> stack{root_.get()};
  while (!stack.empty()) {
    const RadixNode* node = stack.back();
    stack.pop_back();
    int64_t child_locks = 0;
    for (const auto& [child_key, child] : node->children) {
      if (child->parent != node) return Internal("radix child with a wrong parent pointer");
      if (child_key != ChildKey(child->extra_key, child->key)) {
        return Internal("radix child indexed under a key that is not its first page");
      }
      child_locks += child->lock_ref;
      stack.push_back(child.get());
    }
    if (node == root_.get()) continue;
    if (node->key.empty() || node->key.size() % page_size_ != 0) {
      return Internal("radix node key of length " + std::to_string(node->key.size()) +
                      " is empty or not page-aligned");
    }
    if (node->key.size() != node->value.size()) {
      return Internal("radix node key and value lengths differ");
    }
    if (node->lock_ref < child_locks) {
      return Internal("radix node lock_ref " + std::to_string(node->lock_ref) +
                      " is below its children's total " + std::to_string(child_locks));
    }
    (node->lock_ref > 0 ? protected_tokens : evictable) += node->key.size();
    if (IsEvictableLeaf(node)) {
      ++leaves;
      if (!evictable_leaves_.count(LeafKey(const_cast<RadixNode*>(node)))) {
        return Internal("an unlocked leaf is missing from the eviction index");
      }
    }
  }
  if (leaves != evictable_leaves_.size()) {
    return Internal("the eviction index holds " + std::to_string(evictable_leaves_.size()) +
                    " entries for " + std::to_string(leaves) + " unlocked leaves");
  }
  if (evictable != evictable_size_ || protected_tokens != protected_size_) {
    return Internal("radix size counters evictable=" + std::to_string(evictable_size_) +
                    " protected=" + std::to_string(protected_size_) + " but the tree holds " +
                    std::to_string(evictable) + " / " + std::to_string(protected_tokens));
  }
  return Status::Ok();
}

void RadixCache::CacheUnfinishedSeq(SeqKvState& state, const CacheKey& tokens) {
  RADIX_CHECK_MSG(pool_ != nullptr && req_pool_ != nullptr, "token-only tree cannot cache KV");
  RADIX_CHECK(state.req_pool_slot >= 0);
  const size_t len = tokens.tokens.size();
  const std::vector<int32_t> kv(
      req_pool_->Row(state.req_pool_slot).begin(),
      req_pool_->Row(state.req_pool_slot).begin() + static_cast<ptrdiff_t>(len));
  const size_t aligned = AlignDown(len);
  const CacheKey aligned_key{tokens.tokens.first(aligned), tokens.extra_key};
  const size_t new_prefix_len = Insert(aligned_key, std::span(kv).first(aligned));
  RADIX_CHECK(new_prefix_len >= state.cache_protected_len);
  // Another sequence cached [protected, new_prefix_len) meanwhile: ours are duplicates.
  pool_->Free(
      std::span(kv).subspan(state.cache_protected_len, new_prefix_len - state.cache_protected_len));

  MatchResult match = MatchPrefix(aligned_key);
  RADIX_CHECK_MSG(match.matched_len() == aligned, "re-match after insert came up short");
  req_pool_->Write(state.req_pool_slot, state.cache_protected_len,
                   std::span(match.device_indices).subspan(state.cache_protected_len));
  IncLockRef(match.last_node);
  DecLockRef(state.last_node);

  state.prefix_indices = std::move(match.device_indices);
  state.prefix_indices.insert(state.prefix_indices.end(), kv.begin() + aligned, kv.end());
  state.last_node = match.last_node;
  state.cache_protected_len = aligned;
}

void RadixCache::CacheFinishedSeq(SeqKvState& state, const CacheKey& tokens, bool insert) {
  RADIX_CHECK_MSG(pool_ != nullptr && req_pool_ != nullptr, "token-only tree cannot cache KV");
  RADIX_CHECK(state.req_pool_slot >= 0);
  const size_t len = tokens.tokens.size();
  RADIX_CHECK(len >= state.cache_protected_len);
  const std::span<const int32_t> kv = req_pool_->Slice(state.req_pool_slot, 0, len);
  if (insert) {
    const size_t aligned = AlignDown(len);
    const size_t new_prefix_len =
        Insert(CacheKey{tokens.tokens.first(aligned), tokens.extra_key}, kv.first(aligned));
    RADIX_CHECK(new_prefix_len >= state.cache_protected_len);
    pool_->Free(kv.subspan(state.cache_protected_len, new_prefix_len - state.cache_protected_len));
    pool_->Free(kv.subspan(aligned));
  } else {
    pool_->Free(kv.subspan(state.cache_protected_len));
  }
  req_pool_->Free(state.req_pool_slot);
  DecLockRef(state.last_node);
  state = SeqKvState{};
}

}  // namespace radixserve::kv

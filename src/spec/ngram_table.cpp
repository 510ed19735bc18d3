#include "spec/ngram_table.h"

#include <algorithm>

namespace radixserve::spec {

NgramTable::NgramTable(const NgramTableOptions& options) : options_(options) {
  options_.branch_length = std::max<size_t>(options_.branch_length, 2);
  options_.capacity = std::max(options_.capacity, options_.branch_length + 1);
  options_.min_match_window = std::max<size_t>(options_.min_match_window, 1);
  Clear();
}

void NgramTable::Clear() {
  nodes_.assign(1, Node{});
  root_index_.clear();
}

int32_t NgramTable::FindChild(int32_t node, int32_t token) const {
  if (node == kRoot) {
    auto it = root_index_.find(token);
    return it == root_index_.end() ? -1 : it->second;
  }
  for (int32_t c = nodes_[node].first_child; c >= 0; c = nodes_[c].next_sibling) {
    if (nodes_[c].token == token) return c;
  }
  return -1;
}

int32_t NgramTable::FindOrAddChild(int32_t node, int32_t token) {
  if (const int32_t found = FindChild(node, token); found >= 0) return found;
  const auto id = static_cast<int32_t>(nodes_.size());
  Node child;
  child.token = token;
  child.next_sibling = nodes_[node].first_child;
  nodes_.push_back(child);
  nodes_[node].first_child = id;
  if (node == kRoot) root_index_.emplace(token, id);
  return id;
}

void NgramTable::Record(std::span<const int32_t> tokens, size_t from) {
  const size_t n = tokens.size();
  const size_t len = options_.branch_length;
  if (from >= n) return;
  size_t first_start = from >= len - 1 ? from - (len - 1) : 0;
  // Each start position adds at most `len` nodes.
  const size_t room = options_.capacity - 1;
  if ((n - first_start) * len > room) first_start = n - std::max<size_t>(room / len, 1);
  if (nodes_.size() + (n - first_start) * len > options_.capacity) {
    Clear();
  }
  ++clock_;
  for (size_t s = first_start; s < n; ++s) {
    int32_t node = kRoot;
    const size_t end = std::min(n, s + len);
    for (size_t p = s; p < end; ++p) {
      node = FindOrAddChild(node, tokens[p]);
      if (p >= from) {
        ++nodes_[node].count;
        nodes_[node].stamp = clock_;
      }
    }
  }
}

int32_t NgramTable::PickChild(int32_t node) const {
  int32_t best = -1;
  for (int32_t c = nodes_[node].first_child; c >= 0; c = nodes_[c].next_sibling) {
    if (best < 0) {
      best = c;
      continue;
    }
    const Node& a = nodes_[c];
    const Node& b = nodes_[best];
    const bool better = options_.match_type == NgramMatchType::kProb
                            ? (a.count != b.count ? a.count > b.count : a.stamp > b.stamp)
                            : (a.stamp != b.stamp ? a.stamp > b.stamp : a.count > b.count);
    if (better) best = c;
  }
  return best;
}

std::vector<int32_t> NgramTable::Draft(std::span<const int32_t> context, size_t max_tokens) const {
  std::vector<int32_t> best;
  if (max_tokens == 0) return best;
  const size_t longest =
      std::min({options_.max_match_window, options_.branch_length - 1, context.size()});
  std::vector<int32_t> chain;
  for (size_t w = longest; w >= options_.min_match_window && w > 0; --w) {
    int32_t node = kRoot;
    for (size_t i = context.size() - w; i < context.size() && node >= 0; ++i) {
      node = FindChild(node, context[i]);
    }
    if (node < 0) continue;
    chain.clear();
    for (int32_t c = PickChild(node); c >= 0 && chain.size() < max_tokens; c = PickChild(c)) {
      chain.push_back(nodes_[c].token);
    }
    if (chain.size() > best.size()) best = chain;
    if (best.size() == max_tokens) break;
  }
  return best;
}

}  // namespace radixserve::spec

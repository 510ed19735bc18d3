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

bool NgramTable::Prefer(int32_t a_id, int32_t b_id) const {
  const Node& a = nodes_[a_id];
  const Node& b = nodes_[b_id];
  if (options_.match_type == NgramMatchType::kProb) {
    return a.count != b.count ? a.count > b.count : a.stamp > b.stamp;
  }
  return a.stamp != b.stamp ? a.stamp > b.stamp : a.count > b.count;
}

int32_t NgramTable::PickChild(int32_t node) const {
  int32_t best = -1;
  for (int32_t c = nodes_[node].first_child; c >= 0; c = nodes_[c].next_sibling) {
    if (best < 0 || Prefer(c, best)) best = c;
  }
  return best;
}

std::vector<int32_t> NgramTable::RankedChildren(int32_t node) const {
  std::vector<int32_t> children;
  for (int32_t c = nodes_[node].first_child; c >= 0; c = nodes_[c].next_sibling) {
    children.push_back(c);
  }
  // Stable over the sibling order, so equal children keep a fixed order.
  std::stable_sort(children.begin(), children.end(),
                   [this](int32_t a, int32_t b) { return Prefer(a, b); });
  return children;
}

int32_t NgramTable::Match(std::span<const int32_t> context, size_t w) const {
  int32_t node = kRoot;
  for (size_t i = context.size() - w; i < context.size() && node >= 0; ++i) {
    node = FindChild(node, context[i]);
  }
  return node;
}

std::vector<std::pair<size_t, int32_t>> NgramTable::MatchedWindows(
    std::span<const int32_t> context) const {
  std::vector<std::pair<size_t, int32_t>> matches;
  const size_t longest =
      std::min({options_.max_match_window, options_.branch_length - 1, context.size()});
  for (size_t w = longest; w >= options_.min_match_window && w > 0; --w) {
    if (const int32_t node = Match(context, w); node >= 0) matches.emplace_back(w, node);
  }
  return matches;
}

std::vector<int32_t> NgramTable::Draft(std::span<const int32_t> context, size_t max_tokens) const {
  std::vector<int32_t> best;
  if (max_tokens == 0) return best;
  std::vector<int32_t> chain;
  for (const auto& [w, node] : MatchedWindows(context)) {
    chain.clear();
    for (int32_t c = PickChild(node); c >= 0 && chain.size() < max_tokens; c = PickChild(c)) {
      chain.push_back(nodes_[c].token);
    }
    if (chain.size() > best.size()) best = chain;
    if (best.size() == max_tokens) break;
  }
  return best;
}

namespace {

// The tree position of `token` under `parent`, added when new (-1: the tree is full).
int32_t TreeChild(DraftTree& tree, int32_t parent, int32_t token, size_t max_tokens) {
  for (size_t i = 0; i < tree.size(); ++i) {
    if (tree.parents[i] == parent && tree.tokens[i] == token) return static_cast<int32_t>(i);
  }
  if (tree.size() == max_tokens) return -1;
  tree.tokens.push_back(token);
  tree.parents.push_back(parent);
  return static_cast<int32_t>(tree.size() - 1);
}

}  // namespace

DraftTree NgramTable::Tree(std::span<const int32_t> context, size_t max_tokens) const {
  DraftTree tree;
  if (max_tokens == 0) return tree;
  if (options_.match_type == NgramMatchType::kProb) {
    GrowProb(context, max_tokens, tree);
  } else {
    GrowBfs(context, max_tokens, tree);
  }
  return tree;
}

void NgramTable::GrowBfs(std::span<const int32_t> context, size_t max_tokens,
                         DraftTree& tree) const {
  const auto min_w = static_cast<double>(options_.min_match_window);
  const auto max_w =
      static_cast<double>(std::max(options_.max_match_window, options_.min_match_window));
  const auto min_b = static_cast<double>(options_.min_bfs_breadth);
  const auto max_b =
      static_cast<double>(std::max(options_.max_bfs_breadth, options_.min_bfs_breadth));
  const double step = (max_b - min_b) / (max_w - min_w + 1);
  struct Pending {
    int32_t parent;  // tree position (-1: the context's last token)
    double breadth;
    int32_t node;  // trie node whose children continue it
  };
  std::vector<Pending> queue;
  for (const auto& [w, matched] : MatchedWindows(context)) {
    if (tree.size() == max_tokens) return;
    queue.assign(1, Pending{-1, (max_w - static_cast<double>(w)) * step + min_b, matched});
    for (size_t head = 0; head < queue.size() && tree.size() < max_tokens; ++head) {
      const Pending at = queue[head];
      const auto breadth = static_cast<size_t>(std::max(1.0, at.breadth));
      const std::vector<int32_t> children = RankedChildren(at.node);
      for (size_t i = 0; i < std::min(breadth, children.size()); ++i) {
        const int32_t pos = TreeChild(tree, at.parent, nodes_[children[i]].token, max_tokens);
        if (pos < 0) return;
        queue.push_back(Pending{pos, at.breadth - step, children[i]});
      }
    }
  }
}

void NgramTable::GrowProb(std::span<const int32_t> context, size_t max_tokens,
                          DraftTree& tree) const {
  struct Candidate {
    double prob;
    uint64_t order;  // ties: the earlier candidate first
    int32_t parent;
    int32_t node;
  };
  auto worse = [](const Candidate& a, const Candidate& b) {
    return a.prob != b.prob ? a.prob < b.prob : a.order > b.order;
  };
  std::vector<Candidate> heap;
  uint64_t order = 0;
  const size_t top_k = std::max<size_t>(options_.max_bfs_breadth, 1);
  auto expand = [&](int32_t parent, int32_t node, double prob) {
    std::vector<int32_t> children = RankedChildren(node);
    if (children.size() > top_k) children.resize(top_k);
    double total = 0;
    for (int32_t c : children) total += nodes_[c].count;
    if (total <= 0) total = 1;
    for (int32_t c : children) {
      heap.push_back(Candidate{prob * nodes_[c].count / total, order++, parent, c});
      std::push_heap(heap.begin(), heap.end(), worse);
    }
  };
  for (const auto& [w, matched] : MatchedWindows(context)) {
    expand(-1, matched, 1.0);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), worse);
      const Candidate best = heap.back();
      heap.pop_back();
      const int32_t pos = TreeChild(tree, best.parent, nodes_[best.node].token, max_tokens);
      if (pos < 0) return;
      expand(pos, best.node, best.prob);
    }
  }
}

}  // namespace radixserve::spec

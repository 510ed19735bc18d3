// NgramTable: the token n-grams that n-gram speculation (--speculative-algorithm NGRAM, SGLang's
// lookahead cache) drafts from. A trie of token paths: every path of up to `branch_length` tokens
// that occurs in a recorded token sequence (prompts and outputs of the replica's requests) is a
// root-to-node path, and each node counts how often its path was recorded and when last.
//
// Drafting matches the context's last w tokens (w from `max_match_window` down to
// `min_match_window`, never more than branch_length - 1) and follows one continuation from the
// matched node, one child per depth: the most recently recorded one (kBfs) or the most frequent
// one (kProb). The first window whose chain reaches the wanted length wins; otherwise the longest
// chain found.
//
// Tree drafts (DraftTree, SGLang's lookahead tree) take several continuations per node and merge
// the continuations of every matched window, longest window first, into one token tree. kBfs:
// breadth-first from each matched node, taking the most recent children, as many per node as the
// breadth allows: a window of w tokens starts at breadth (max_window - w) * s + min_breadth, with
// s = (max_breadth - min_breadth) / (max_window - min_window + 1), and the breadth falls by s per
// level (at least 1): long matches are trusted and followed deep, short ones spread wide. kProb:
// best first by path probability, a child's share being its count over its parent's top
// max_breadth children.
//
// Capacity: at most `capacity` nodes. A recording that could pass it first clears the table (the
// recording itself is then kept, truncated to its last capacity / branch_length start positions).
//
// Thread affinity: one engine thread; not synchronized.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace radixserve::spec {

enum class NgramMatchType { kBfs, kProb };

struct NgramTableOptions {
  size_t min_match_window = 1;
  size_t max_match_window = 12;
  size_t branch_length = 18;
  size_t capacity = 10'000'000;  // trie nodes
  NgramMatchType match_type = NgramMatchType::kBfs;
  size_t min_bfs_breadth = 1;  // tree drafts only
  size_t max_bfs_breadth = 10;
};

// A token tree hanging off the context's last token: tokens[i]'s parent is tokens[parents[i]], or
// the context's last token when parents[i] is -1. Parents come before their children.
struct DraftTree {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;

  size_t size() const { return tokens.size(); }
  bool empty() const { return tokens.empty(); }
};

class NgramTable {
 public:
  explicit NgramTable(const NgramTableOptions& options);

  // Records `tokens`, of which the positions before `from` were recorded by an earlier call with
  // the same prefix: every path of up to branch_length tokens ending at a position >= from.
  void Record(std::span<const int32_t> tokens, size_t from = 0);

  // Up to max_tokens tokens predicted to follow `context` (empty when nothing matches).
  std::vector<int32_t> Draft(std::span<const int32_t> context, size_t max_tokens) const;
  // Up to max_tokens tokens in a tree of continuations of `context` (empty when nothing matches).
  DraftTree Tree(std::span<const int32_t> context, size_t max_tokens) const;

  size_t num_nodes() const { return nodes_.size(); }
  const NgramTableOptions& options() const { return options_; }

 private:
  struct Node {
    int32_t token = -1;
    int32_t first_child = -1;
    int32_t next_sibling = -1;
    uint32_t count = 0;
    uint64_t stamp = 0;
  };
  static constexpr int32_t kRoot = 0;

  void Clear();
  int32_t FindChild(int32_t node, int32_t token) const;
  int32_t FindOrAddChild(int32_t node, int32_t token);
  // The continuation match_type prefers among node's children (-1 when it has none).
  int32_t PickChild(int32_t node) const;
  // Whether child a comes before child b in match_type's order.
  bool Prefer(int32_t a, int32_t b) const;
  // node's children in match_type's order.
  std::vector<int32_t> RankedChildren(int32_t node) const;
  // The trie node the context's last w tokens lead to (-1: not recorded).
  int32_t Match(std::span<const int32_t> context, size_t w) const;
  // (w, node) for every window the table matches, longest first: w from max_match_window
  // (at most branch_length - 1 and the context's length) down to min_match_window.
  std::vector<std::pair<size_t, int32_t>> MatchedWindows(std::span<const int32_t> context) const;
  void GrowBfs(std::span<const int32_t> context, size_t max_tokens, DraftTree& tree) const;
  void GrowProb(std::span<const int32_t> context, size_t max_tokens, DraftTree& tree) const;

  NgramTableOptions options_;
  std::vector<Node> nodes_;                          // nodes_[0] is the root
  std::unordered_map<int32_t, int32_t> root_index_;  // the root's children by token
  uint64_t clock_ = 0;
};

}  // namespace radixserve::spec

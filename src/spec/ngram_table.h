// NgramTable: the token n-grams that n-gram speculation (--speculative-algorithm NGRAM, SGLang's
// lookahead cache) drafts from. A trie of token paths: every path of up to `branch_length` tokens
// that occurs in a recorded token sequence (prompts and outputs of the replica's requests) is a
// root-to-node path, and each node counts how often its path was recorded and when last.
//
// Drafting matches the context's last w tokens (w from `max_match_window` down to
// `min_match_window`, never more than branch_length - 1) and follows one continuation from the
// matched node, one child per depth: the most recently recorded one (kBfs) or the most frequent
// one (kProb). The first window whose chain reaches the wanted length wins; otherwise the longest
// chain found. Drafts are a single chain: tree drafts (SGLang's BFS breadth) are not built.
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
#include <vector>

namespace radixserve::spec {

enum class NgramMatchType { kBfs, kProb };

struct NgramTableOptions {
  size_t min_match_window = 1;
  size_t max_match_window = 12;
  size_t branch_length = 18;
  size_t capacity = 10'000'000;  // trie nodes
  NgramMatchType match_type = NgramMatchType::kBfs;
};

class NgramTable {
 public:
  explicit NgramTable(const NgramTableOptions& options);

  // Records `tokens`, of which the positions before `from` were recorded by an earlier call with
  // the same prefix: every path of up to branch_length tokens ending at a position >= from.
  void Record(std::span<const int32_t> tokens, size_t from = 0);

  // Up to max_tokens tokens predicted to follow `context` (empty when nothing matches).
  std::vector<int32_t> Draft(std::span<const int32_t> context, size_t max_tokens) const;

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

  NgramTableOptions options_;
  std::vector<Node> nodes_;                          // nodes_[0] is the root
  std::unordered_map<int32_t, int32_t> root_index_;  // the root's children by token
  uint64_t clock_ = 0;
};

}  // namespace radixserve::spec

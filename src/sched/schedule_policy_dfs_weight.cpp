#include <algorithm>
#include <unordered_map>

#include "kv/radix_node.h"
#include "sched/schedule_policy.h"

namespace radixserve::sched {

namespace {

struct DfsState {
  std::unordered_map<const kv::RadixNode*, std::vector<Sequence*>> node_to_seqs;
  std::unordered_map<const kv::RadixNode*, size_t> weight;
};

size_t ComputeWeight(const kv::RadixNode* node, DfsState& state) {
  size_t w = 0;
  if (auto it = state.node_to_seqs.find(node); it != state.node_to_seqs.end())
    w = it->second.size();
  for (const auto& [key, child] : node->children) w += ComputeWeight(child.get(), state);
  state.weight[node] = w;
  return w;
}

void Emit(const kv::RadixNode* node, DfsState& state, std::vector<Sequence*>& out) {
  std::vector<const kv::RadixNode*> children;
  for (const auto& [key, child] : node->children) {
    if (state.weight[child.get()] > 0) children.push_back(child.get());
  }
  // Heaviest subtree first; creation order breaks ties so the order is reproducible.
  std::stable_sort(children.begin(), children.end(),
                   [&](const kv::RadixNode* a, const kv::RadixNode* b) {
                     if (state.weight[a] != state.weight[b])
                       return state.weight[a] > state.weight[b];
                     return a->creation < b->creation;
                   });
  for (const kv::RadixNode* child : children) Emit(child, state, out);
  if (auto it = state.node_to_seqs.find(node); it != state.node_to_seqs.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
}

}  // namespace

void DfsWeightPolicy::Order(std::vector<Sequence*>& waiting, const PolicyContext& context) {
  DfsState state;
  const kv::RadixNode* root = nullptr;
  for (Sequence* seq : waiting) {
    MatchSequencePrefix(seq, *context.cache);
    const kv::RadixNode* node = seq->match.last_node;
    if (node == nullptr) {
      FcfsPolicy().Order(waiting, context);
      return;
    }
    state.node_to_seqs[node].push_back(seq);
  }
  if (waiting.empty()) return;
  root = waiting.front()->match.last_node;
  while (root->parent != nullptr) root = root->parent;
  ComputeWeight(root, state);
  std::vector<Sequence*> ordered;
  Emit(root, state, ordered);
  waiting = std::move(ordered);
}

}  // namespace radixserve::sched

// SeqKvState: the KV bookkeeping of one sequence that the prefix cache reads and updates
// (PrefixCache::CacheUnfinishedSeq / CacheFinishedSeq). The engine's Sequence embeds one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace radixserve::kv {

struct RadixNode;

struct SeqKvState {
  // Row in ReqToTokenPool, or -1 when the sequence holds none.
  int32_t req_pool_slot = -1;
  // KV slots of positions [0, prefix_indices.size()) that are already computed: the cached
  // prefix plus (after a chunk) the sequence's own unaligned tail.
  std::vector<int32_t> prefix_indices;
  // The node this sequence locks (nullptr: nothing locked).
  RadixNode* last_node = nullptr;
  // Positions [0, cache_protected_len) are owned by the cache; page-aligned.
  size_t cache_protected_len = 0;
};

}  // namespace radixserve::kv

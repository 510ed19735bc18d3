// RadixNode: one edge-labelled node of RadixCache's tree. The key is a run of tokens (a multiple
// of page_size long, except the root's empty key) and value holds their KV slots. Children are
// indexed by their first page of tokens plus the namespace (extra_key).
//
// Only RadixCache creates, splits or deletes nodes; the scheduler holds RadixNode* solely as an
// opaque lock handle (valid while it holds the lock: a locked node is never deleted or merged).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace radixserve::kv {

struct RadixNode {
  std::vector<int32_t> key;
  std::vector<int32_t> value;
  std::string extra_key;
  RadixNode* parent = nullptr;
  std::unordered_map<std::string, std::unique_ptr<RadixNode>> children;
  int32_t lock_ref = 0;
  uint64_t last_access = 0;  // logical clock of RadixCache
  uint64_t creation = 0;
  uint64_t hit_count = 0;
  // The storage tier (hicache.h) has stored, or queued, every block that ends in this node.
  bool disk_backed = false;
};

}  // namespace radixserve::kv

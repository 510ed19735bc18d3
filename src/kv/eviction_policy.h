// EvictionPolicy: which unlocked leaf of the radix tree is evicted first
// (`--radix-eviction-policy`). Every policy orders by a (primary, secondary) key, smallest first.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace radixserve::kv {

enum class EvictionPolicy {
  kLru,   // least recently used (default)
  kLfu,   // fewest hits, then least recently used
  kFifo,  // oldest created
  kMru,   // most recently used
  kFilo,  // newest created
};

// Accepts lru, lfu, fifo, mru, filo; anything else is kInvalidArgument.
Expected<EvictionPolicy> ParseEvictionPolicy(std::string_view name);

// The ordering key of a leaf under `policy`; the smallest key is evicted first.
std::pair<int64_t, int64_t> EvictionKey(EvictionPolicy policy, uint64_t last_access,
                                        uint64_t creation, uint64_t hit_count);

}  // namespace radixserve::kv

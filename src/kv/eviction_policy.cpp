#include "kv/eviction_policy.h"

#include <string>

namespace radixserve::kv {

Expected<EvictionPolicy> ParseEvictionPolicy(std::string_view name) {
  if (name == "lru") return EvictionPolicy::kLru;
  if (name == "lfu") return EvictionPolicy::kLfu;
  if (name == "fifo") return EvictionPolicy::kFifo;
  if (name == "mru") return EvictionPolicy::kMru;
  if (name == "filo") return EvictionPolicy::kFilo;
  return InvalidArgument("--radix-eviction-policy: invalid choice '" + std::string(name) +
                         "' (choose from lru, lfu, fifo, mru, filo)");
}

std::pair<int64_t, int64_t> EvictionKey(EvictionPolicy policy, uint64_t last_access,
                                        uint64_t creation, uint64_t hit_count) {
  const auto access = static_cast<int64_t>(last_access);
  const auto created = static_cast<int64_t>(creation);
  switch (policy) {
    case EvictionPolicy::kLru:
      return {access, created};
    case EvictionPolicy::kLfu:
      return {static_cast<int64_t>(hit_count), access};
    case EvictionPolicy::kFifo:
      return {created, access};
    case EvictionPolicy::kMru:
      return {-access, -created};
    case EvictionPolicy::kFilo:
      return {-created, -access};
  }
  RADIX_CHECK_MSG(false, "unknown EvictionPolicy");
}

}  // namespace radixserve::kv

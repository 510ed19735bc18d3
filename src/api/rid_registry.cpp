#include "api/rid_registry.h"

namespace radixserve::api {

std::optional<std::string> RidRegistry::ClaimAll(const std::vector<std::string>& rids) {
  std::lock_guard lock(mu_);
  std::unordered_set<std::string> fresh;
  for (const std::string& rid : rids) {
    if (live_.count(rid) != 0 || !fresh.insert(rid).second) return rid;
  }
  live_.merge(fresh);
  return std::nullopt;
}

void RidRegistry::Release(const std::string& rid) {
  std::lock_guard lock(mu_);
  live_.erase(rid);
}

size_t RidRegistry::size() const {
  std::lock_guard lock(mu_);
  return live_.size();
}

}  // namespace radixserve::api

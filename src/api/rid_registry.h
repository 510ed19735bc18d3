// RidRegistry: the request ids of every call in flight, so that a client cannot reuse a live rid
// (SGLang refuses a duplicate request ID) and a disconnect or an exact abort can only ever reach
// the requests it names.
//
// Thread safety: every method may be called from any thread (one mutex).
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace radixserve::api {

class RidRegistry {
 public:
  // Claims all of `rids` at once. If one is already live, or appears twice in `rids`, nothing is
  // claimed and that rid is returned.
  std::optional<std::string> ClaimAll(const std::vector<std::string>& rids);
  // Gives a claimed rid back (unknown rids are ignored).
  void Release(const std::string& rid);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_set<std::string> live_;
};

}  // namespace radixserve::api

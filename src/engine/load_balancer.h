// LoadBalancer: picks the data-parallel replica of each new request (--load-balance-method, the
// choices SGLang's DataParallelController has):
//   * round_robin     — replicas in turn;
//   * shortest_queue  — the replica with the fewest requests in flight (queued or running);
//   * minimum_tokens  — the replica with the fewest tokens in flight (prompt plus generated so
//                       far of its live requests). SGLang offers it only with DP attention,
//                       where it reads the workers' token load; here every replica is local, so
//                       the balancer counts the tokens itself.
// Ties go to the lowest rank. The balancer keeps its own in-flight counts, updated at dispatch
// and from the requests' events, so a burst of submissions spreads at once (no polling lag).
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace radixserve::engine {

enum class LoadBalanceMethod { kRoundRobin, kShortestQueue, kMinimumTokens };

// "round_robin" | "shortest_queue" | "minimum_tokens"; kInvalidArgument otherwise.
Expected<LoadBalanceMethod> ParseLoadBalanceMethod(std::string_view name);

class LoadBalancer {
 public:
  LoadBalancer(LoadBalanceMethod method, int replicas);

  // Chooses the replica of a request with `prompt_tokens` tokens and counts it in flight there.
  // `routed`: the replica a router chose (SGLang's routed_dp_rank), counted the same way.
  int Assign(int64_t prompt_tokens, std::optional<int> routed = std::nullopt);
  // A live request on `replica` produced `tokens` more output tokens.
  void AddTokens(int replica, int64_t tokens);
  // A request on `replica` ended (or was rejected); `tokens` is everything counted for it.
  void Release(int replica, int64_t tokens);

  int64_t requests_in_flight(int replica) const;
  int64_t tokens_in_flight(int replica) const;
  // Requests ever assigned to `replica`.
  int64_t assigned(int replica) const;

 private:
  struct Load {
    int64_t requests = 0;
    int64_t tokens = 0;
    int64_t assigned = 0;
  };

  LoadBalanceMethod method_;
  mutable std::mutex mutex_;
  std::vector<Load> loads_;
  uint64_t next_ = 0;  // round robin
};

}  // namespace radixserve::engine

#include "engine/load_balancer.h"

#include <string>

#include "common/check.h"

namespace radixserve::engine {

Expected<LoadBalanceMethod> ParseLoadBalanceMethod(std::string_view name) {
  if (name == "round_robin") return LoadBalanceMethod::kRoundRobin;
  if (name == "shortest_queue") return LoadBalanceMethod::kShortestQueue;
  if (name == "minimum_tokens") return LoadBalanceMethod::kMinimumTokens;
  return InvalidArgument("--load-balance-method: invalid choice '" + std::string(name) +
                         "' (choose from 'round_robin', 'shortest_queue', 'minimum_tokens')");
}

LoadBalancer::LoadBalancer(LoadBalanceMethod method, int replicas)
    : method_(method), loads_(static_cast<size_t>(replicas)) {
  RADIX_CHECK(replicas >= 1);
}

int LoadBalancer::Assign(int64_t prompt_tokens, std::optional<int> routed) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t chosen = 0;
  if (routed) {
    RADIX_CHECK(*routed >= 0 && static_cast<size_t>(*routed) < loads_.size());
    chosen = static_cast<size_t>(*routed);
  } else {
    switch (method_) {
      case LoadBalanceMethod::kRoundRobin:
        chosen = next_++ % loads_.size();
        break;
      case LoadBalanceMethod::kShortestQueue:
        for (size_t r = 1; r < loads_.size(); ++r) {
          if (loads_[r].requests < loads_[chosen].requests) chosen = r;
        }
        break;
      case LoadBalanceMethod::kMinimumTokens:
        for (size_t r = 1; r < loads_.size(); ++r) {
          if (loads_[r].tokens < loads_[chosen].tokens) chosen = r;
        }
        break;
    }
  }
  Load& load = loads_[chosen];
  ++load.requests;
  ++load.assigned;
  load.tokens += prompt_tokens;
  return static_cast<int>(chosen);
}

void LoadBalancer::AddTokens(int replica, int64_t tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  loads_.at(static_cast<size_t>(replica)).tokens += tokens;
}

void LoadBalancer::Release(int replica, int64_t tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  Load& load = loads_.at(static_cast<size_t>(replica));
  RADIX_CHECK(load.requests > 0 && load.tokens >= tokens);
  --load.requests;
  load.tokens -= tokens;
}

int64_t LoadBalancer::requests_in_flight(int replica) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return loads_.at(static_cast<size_t>(replica)).requests;
}

int64_t LoadBalancer::tokens_in_flight(int replica) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return loads_.at(static_cast<size_t>(replica)).tokens;
}

int64_t LoadBalancer::assigned(int replica) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return loads_.at(static_cast<size_t>(replica)).assigned;
}

}  // namespace radixserve::engine

// Timing implementations of one kernel against each other for kernel_choice.h: how long a
// call takes, measured so that noise on a shared machine is unlikely to decide the order.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>

namespace radixserve::kernels {

// Seconds per call of `call`, over a round of calls lasting at least ~2 ms.
template <class Call>
double SecondsPerCall(Call&& call) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  int64_t calls = 0;
  std::chrono::duration<double> elapsed{};
  do {
    call();
    ++calls;
    elapsed = Clock::now() - start;
  } while (elapsed.count() < 2e-3);
  return elapsed.count() / static_cast<double>(calls);
}

// Seconds per call of each of `calls`: one round of each to warm the caches and the clocks, then
// six alternating rounds (so a burst of noise hits all of them), the best round of each.
template <class... Calls>
std::array<double, sizeof...(Calls)> BestOfAlternatingRounds(Calls&&... calls) {
  (SecondsPerCall(calls), ...);
  std::array<double, sizeof...(Calls)> best;
  best.fill(1e30);
  for (int i = 0; i < 6; ++i) {
    size_t k = 0;
    ((best[k] = std::min(best[k], SecondsPerCall(calls)), ++k), ...);
  }
  return best;
}

}  // namespace radixserve::kernels

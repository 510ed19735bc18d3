// Timing for the kernel micro-benchmarks (bench/cpp): the best of several runs, what a kernel can
// do, and their mean, what a server that lives with every run sees. On a shared VM the two differ
// by 5-25 %; compare either only against runs taken back to back.
#pragma once

#include <algorithm>
#include <chrono>

namespace radixserve::bench {

struct RunSeconds {
  double best = 1e30;
  double mean = 0.0;
};

// Runs fn once untimed (it faults in the outputs' pages and warms the caches), then `reps` times.
template <typename Fn>
RunSeconds TimeRuns(int reps, Fn&& fn) {
  fn();
  RunSeconds out;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.best = std::min(out.best, s);
    out.mean += s / reps;
  }
  return out;
}

}  // namespace radixserve::bench

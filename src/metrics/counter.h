// Counter: a monotonically increasing double (requests, tokens). One labelled child of a
// MetricFamily<Counter>.
//
// Thread-safety: Inc() and Value() may be called from any thread at any time; Inc() is lock-free
// (one atomic read-modify-write), so the engine thread can call it per token.
#pragma once

#include <atomic>

namespace radixserve::metrics {

class Counter {
 public:
  static constexpr const char* kTypeName = "counter";

  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds `amount`, which must be >= 0 (a negative amount is a programmer error).
  void Inc(double amount = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

}  // namespace radixserve::metrics

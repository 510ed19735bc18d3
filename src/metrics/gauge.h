// Gauge: a double that goes up and down (running requests, token usage, cache hit rate). One
// labelled child of a MetricFamily<Gauge>.
//
// Thread-safety: every method may be called from any thread; all are lock-free atomics. Set()
// wins over concurrent Inc()/Dec() in whatever order the atomics land ("most recent" semantics).
#pragma once

#include <atomic>

namespace radixserve::metrics {

class Gauge {
 public:
  static constexpr const char* kTypeName = "gauge";

  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Inc(double amount = 1.0) { value_.fetch_add(amount, std::memory_order_relaxed); }
  void Dec(double amount = 1.0) { value_.fetch_sub(amount, std::memory_order_relaxed); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

}  // namespace radixserve::metrics

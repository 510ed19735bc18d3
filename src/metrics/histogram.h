// Histogram: cumulative-bucket distribution of observed values (latencies, token counts), with the
// Prometheus `le` (less-or-equal) bucket semantics. One labelled child of a
// MetricFamily<Histogram>.
//
// Thread-safety: Observe()/ObserveMany() are lock-free (one relaxed atomic add on the bucket and
// one on the sum) and may run on any thread concurrently with Snapshot(). A snapshot taken while
// observations are in flight is internally consistent for counts (`count` is the sum of the bucket
// counts it read, so the +Inf bucket always equals `count`), while `sum` may lag or lead by the
// observations in flight.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"

namespace radixserve::metrics {

// Checks bounds a user supplied for a histogram: non-empty, no NaN, strictly increasing.
// +Inf may appear only last. Returns InvalidArgument naming the problem.
Status ValidateBucketBounds(const std::vector<double>& bounds);

// The upper bounds as exposed: `bounds` with +Inf appended unless already last.
// `bounds` must pass ValidateBucketBounds (RADIX_CHECK).
std::vector<double> WithInfBound(const std::vector<double>& bounds);

struct HistogramSnapshot {
  std::vector<double> upper_bounds;         // ends with +Inf
  std::vector<uint64_t> cumulative_counts;  // same length; last == count
  uint64_t count = 0;
  double sum = 0.0;
};

class Histogram {
 public:
  static constexpr const char* kTypeName = "histogram";

  // `bounds` must pass ValidateBucketBounds (a failure is a programmer error: validate user input
  // first). +Inf is appended when missing.
  explicit Histogram(const std::vector<double>& bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Records one value: the first bucket whose bound is >= value; NaN lands in +Inf.
  void Observe(double value);

  // Records `n` observations at once, all of them falling in the bucket of `bucket_value`, and
  // adds `sum_delta` to the sum. SGLang's inter-token latency uses this: a step that produced n
  // tokens in `interval` seconds counts n observations of interval/n and adds `interval`.
  void ObserveMany(double bucket_value, uint64_t n, double sum_delta);

  HistogramSnapshot Snapshot() const;
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }

 private:
  size_t BucketIndex(double value) const;

  std::vector<double> upper_bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per-bucket (not cumulative) counts
  std::atomic<double> sum_{0.0};
};

}  // namespace radixserve::metrics

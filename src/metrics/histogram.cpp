#include "metrics/histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/check.h"
#include "metrics/text_format.h"

namespace radixserve::metrics {

Status ValidateBucketBounds(const std::vector<double>& bounds) {
  if (bounds.empty()) return InvalidArgument("histogram buckets must not be empty");
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (std::isnan(bounds[i])) return InvalidArgument("histogram buckets must be numbers");
    if (std::isinf(bounds[i]) && (bounds[i] < 0 || i + 1 != bounds.size())) {
      return InvalidArgument("only the last histogram bucket may be +Inf");
    }
    if (i > 0 && !(bounds[i - 1] < bounds[i])) {
      return InvalidArgument("histogram buckets must be strictly increasing, got " +
                             FormatValue(bounds[i - 1]) + " then " + FormatValue(bounds[i]));
    }
  }
  return Status::Ok();
}

std::vector<double> WithInfBound(const std::vector<double>& bounds) {
  RADIX_CHECK(ValidateBucketBounds(bounds).ok());
  std::vector<double> out = bounds;
  if (!std::isinf(out.back())) out.push_back(std::numeric_limits<double>::infinity());
  return out;
}

Histogram::Histogram(const std::vector<double>& bounds)
    : upper_bounds_(WithInfBound(bounds)),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(upper_bounds_.size())) {
  for (size_t i = 0; i < upper_bounds_.size(); ++i) buckets_[i].store(0);
}

size_t Histogram::BucketIndex(double value) const {
  if (std::isnan(value)) return upper_bounds_.size() - 1;
  auto it = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value);
  return static_cast<size_t>(it - upper_bounds_.begin());
}

void Histogram::Observe(double value) {
  buckets_[BucketIndex(value)].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

void Histogram::ObserveMany(double bucket_value, uint64_t n, double sum_delta) {
  if (n == 0) return;
  buckets_[BucketIndex(bucket_value)].fetch_add(n, std::memory_order_relaxed);
  sum_.fetch_add(sum_delta, std::memory_order_relaxed);
}

HistogramSnapshot Histogram::Snapshot() const {
  HistogramSnapshot snap;
  snap.upper_bounds = upper_bounds_;
  snap.cumulative_counts.resize(upper_bounds_.size());
  uint64_t running = 0;
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    snap.cumulative_counts[i] = running;
  }
  snap.count = running;
  snap.sum = sum_.load(std::memory_order_relaxed);
  return snap;
}

}  // namespace radixserve::metrics

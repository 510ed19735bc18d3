// LazyChild<T>: one child of a MetricFamily<T> for fixed label values, created on first use and
// then reached without a lock. Creating on first use (not up front) keeps a series out of the
// exposition until something was recorded, as SGLang's collectors behave.
//
// Thread-safety: Get() may race from several threads; they all obtain the same child because
// MetricFamily::Labels() is idempotent. The family must outlive this object.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "metrics/metric_family.h"

namespace radixserve::metrics {

template <typename T>
class LazyChild {
 public:
  LazyChild(MetricFamily<T>* family, std::vector<std::string> label_values)
      : family_(family), label_values_(std::move(label_values)) {}

  T& Get() {
    T* child = child_.load(std::memory_order_acquire);
    if (child == nullptr) [[unlikely]] {
      child = &family_->Labels(label_values_);
      child_.store(child, std::memory_order_release);
    }
    return *child;
  }

 private:
  MetricFamily<T>* family_;
  std::vector<std::string> label_values_;
  std::atomic<T*> child_{nullptr};
};

}  // namespace radixserve::metrics

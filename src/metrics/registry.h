// Registry: the set of metric families one process exposes at /metrics, and the Prometheus text
// exposition (format 0.0.4, content type kContentType) of all of them.
//
// Threads: Add*() usually runs at startup but is safe at any time; Expose() runs on HTTP threads
// concurrently with updates from the engine thread. Families are exposed in registration order.
// Returned family references stay valid for the registry's lifetime.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "metrics/counter.h"
#include "metrics/gauge.h"
#include "metrics/histogram.h"
#include "metrics/metric_family.h"

namespace radixserve::metrics {

class Registry {
 public:
  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // A name (or, for a histogram, any of its _bucket/_count/_sum sample names) that collides with
  // one already registered is a programmer error (RADIX_CHECK), as are invalid names.
  MetricFamily<Counter>& AddCounter(const std::string& name, const std::string& help,
                                    std::vector<std::string> label_names = {});
  MetricFamily<Gauge>& AddGauge(const std::string& name, const std::string& help,
                                std::vector<std::string> label_names = {});
  // `bounds` must pass ValidateBucketBounds (RADIX_CHECK); +Inf is appended.
  MetricFamily<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                        std::vector<std::string> label_names,
                                        std::vector<double> bounds);

  // The whole exposition text; every line ends with '\n'. Families without samples are left out.
  std::string Expose() const;
  // Every registered family as (name, type), in registration order, samples or not.
  std::vector<std::pair<std::string, std::string>> Families() const;

 private:
  void Reserve(const std::vector<std::string>& sample_names);

  mutable std::mutex mutex_;
  std::set<std::string> sample_names_;
  std::vector<std::unique_ptr<MetricFamilyBase>> families_;
};

}  // namespace radixserve::metrics

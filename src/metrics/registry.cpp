#include "metrics/registry.h"

#include "common/check.h"

namespace radixserve::metrics {

void Registry::Reserve(const std::vector<std::string>& sample_names) {
  for (const std::string& name : sample_names) {
    RADIX_CHECK_MSG(!sample_names_.contains(name), name.c_str());
  }
  sample_names_.insert(sample_names.begin(), sample_names.end());
}

MetricFamily<Counter>& Registry::AddCounter(const std::string& name, const std::string& help,
                                            std::vector<std::string> label_names) {
  auto family = std::make_unique<MetricFamily<Counter>>(name, help, std::move(label_names),
                                                        [] { return std::make_unique<Counter>(); });
  std::lock_guard<std::mutex> lock(mutex_);
  Reserve({name});
  auto& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

MetricFamily<Gauge>& Registry::AddGauge(const std::string& name, const std::string& help,
                                        std::vector<std::string> label_names) {
  auto family = std::make_unique<MetricFamily<Gauge>>(name, help, std::move(label_names),
                                                      [] { return std::make_unique<Gauge>(); });
  std::lock_guard<std::mutex> lock(mutex_);
  Reserve({name});
  auto& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

MetricFamily<Histogram>& Registry::AddHistogram(const std::string& name, const std::string& help,
                                                std::vector<std::string> label_names,
                                                std::vector<double> bounds) {
  RADIX_CHECK_MSG(ValidateBucketBounds(bounds).ok(), name.c_str());
  auto family = std::make_unique<MetricFamily<Histogram>>(
      name, help, std::move(label_names),
      [bounds = std::move(bounds)] { return std::make_unique<Histogram>(bounds); });
  std::lock_guard<std::mutex> lock(mutex_);
  Reserve({name, name + "_bucket", name + "_count", name + "_sum"});
  auto& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

std::string Registry::Expose() const {
  std::string out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& family : families_) family->WriteText(out);
  return out;
}

std::vector<std::pair<std::string, std::string>> Registry::Families() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& family : families_) {
    out.emplace_back(family->name(), std::string(family->type_name()));
  }
  return out;
}

}  // namespace radixserve::metrics

// MetricFamily<T>: one named metric (HELP, TYPE, label names) and its children, one child of type
// T (Counter, Gauge or Histogram) per distinct tuple of label values.
//
// Ownership and threads: the family owns its children; a reference returned by Labels() stays
// valid for the family's lifetime, so hot paths (the engine thread) look a child up once and then
// update it lock-free. Labels() and WriteText() take the family's mutex and may be called from any
// thread. Children are exposed in creation order, each sample's labels in name order. A family
// without label names has its single child from the start (exposed as 0 before any update), as
// the official client does. A labelled family without children writes nothing, not even HELP and
// TYPE: what SGLang's multiprocess registry serves (sglang-router's /engine_metrics parser
// refuses some of SGLang's declared-but-never-set families, e.g. an upper-case name).
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "metrics/sample_writer.h"
#include "metrics/text_format.h"

namespace radixserve::metrics {

// Type-erased view the Registry keeps.
class MetricFamilyBase {
 public:
  virtual ~MetricFamilyBase() = default;
  virtual const std::string& name() const = 0;
  // Appends `# HELP`, `# TYPE` and every child's samples.
  virtual std::string_view type_name() const = 0;
  virtual void WriteText(std::string& out) const = 0;
};

template <typename T>
class MetricFamily final : public MetricFamilyBase {
 public:
  using Factory = std::function<std::unique_ptr<T>()>;

  // Names must be valid (IsValidMetricName / IsValidLabelName, distinct labels): RADIX_CHECK.
  MetricFamily(std::string name, std::string help, std::vector<std::string> label_names,
               Factory factory)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        factory_(std::move(factory)) {
    RADIX_CHECK_MSG(IsValidMetricName(name_), name_.c_str());
    for (size_t i = 0; i < label_names_.size(); ++i) {
      RADIX_CHECK_MSG(IsValidLabelName(label_names_[i]), label_names_[i].c_str());
      for (size_t j = 0; j < i; ++j) RADIX_CHECK(label_names_[i] != label_names_[j]);
    }
    if (label_names_.empty()) Labels({});
  }

  // The child for these label values (one per label name, in order), created on first use.
  T& Labels(const std::vector<std::string>& values) {
    RADIX_CHECK_MSG(values.size() == label_names_.size(), name_.c_str());
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(values);
    if (it != index_.end()) return *children_[it->second].metric;
    Child child;
    for (size_t i = 0; i < values.size(); ++i) {
      child.labels.emplace_back(label_names_[i], EscapeLabelValue(values[i]));
    }
    std::sort(child.labels.begin(), child.labels.end());
    child.metric = factory_();
    index_.emplace(values, children_.size());
    children_.push_back(std::move(child));
    return *children_.back().metric;
  }

  const std::string& name() const override { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  std::string_view type_name() const override { return T::kTypeName; }

  void WriteText(std::string& out) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (children_.empty()) return;
    out += "# HELP " + name_ + " " + EscapeHelp(help_) + "\n";
    out += "# TYPE " + name_ + " " + T::kTypeName + "\n";
    for (const Child& child : children_) WriteSamples(out, name_, child.labels, *child.metric);
  }

 private:
  struct Child {
    LabelPairs labels;  // sorted by label name
    std::unique_ptr<T> metric;
  };

  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const Factory factory_;
  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, size_t> index_;
  std::vector<Child> children_;
};

}  // namespace radixserve::metrics

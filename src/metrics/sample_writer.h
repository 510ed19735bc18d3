// Writes the sample lines of one metric child in the Prometheus text format 0.0.4. Used by
// MetricFamily when a Registry is exposed; nothing here touches shared state beyond the child's
// own atomics.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "metrics/counter.h"
#include "metrics/gauge.h"
#include "metrics/histogram.h"

namespace radixserve::metrics {

// A child's labels: (name, already-escaped value) pairs sorted by name. Samples print their labels
// in name order, `le` included, as the official Python client (0.2x) does.
using LabelPairs = std::vector<std::pair<std::string, std::string>>;

// Counter and gauge: one line `name{labels} value`. Histogram: `name_bucket{labels+le}` for every
// bound in increasing order (cumulative counts, ending with le="+Inf"), then `name_count` and,
// when the first bound is >= 0 (the client's rule), `name_sum`. No braces when there are no labels.
void WriteSamples(std::string& out, std::string_view name, const LabelPairs& labels,
                  const Counter& counter);
void WriteSamples(std::string& out, std::string_view name, const LabelPairs& labels,
                  const Gauge& gauge);
void WriteSamples(std::string& out, std::string_view name, const LabelPairs& labels,
                  const Histogram& histogram);

}  // namespace radixserve::metrics

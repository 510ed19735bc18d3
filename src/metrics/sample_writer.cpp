#include "metrics/sample_writer.h"

#include "metrics/text_format.h"

namespace radixserve::metrics {
namespace {

// `extra_name` (may be empty) is merged into the sorted label list at its place.
void WriteLine(std::string& out, std::string_view name, std::string_view suffix,
               const LabelPairs& labels, std::string_view extra_name, std::string_view extra_value,
               double value) {
  out.append(name).append(suffix);
  if (!labels.empty() || !extra_name.empty()) {
    out += '{';
    bool first = true;
    bool extra_done = extra_name.empty();
    auto put = [&](std::string_view key, std::string_view escaped) {
      if (!first) out += ',';
      first = false;
      out.append(key).append("=\"").append(escaped).append("\"");
    };
    for (const auto& [key, escaped] : labels) {
      if (!extra_done && extra_name < key) {
        put(extra_name, extra_value);
        extra_done = true;
      }
      put(key, escaped);
    }
    if (!extra_done) put(extra_name, extra_value);
    out += '}';
  }
  out += ' ';
  out += FormatValue(value);
  out += '\n';
}

}  // namespace

void WriteSamples(std::string& out, std::string_view name, const LabelPairs& labels,
                  const Counter& counter) {
  WriteLine(out, name, "", labels, "", "", counter.Value());
}

void WriteSamples(std::string& out, std::string_view name, const LabelPairs& labels,
                  const Gauge& gauge) {
  WriteLine(out, name, "", labels, "", "", gauge.Value());
}

void WriteSamples(std::string& out, std::string_view name, const LabelPairs& labels,
                  const Histogram& histogram) {
  const HistogramSnapshot snap = histogram.Snapshot();
  for (size_t i = 0; i < snap.upper_bounds.size(); ++i) {
    WriteLine(out, name, "_bucket", labels, "le", FormatValue(snap.upper_bounds[i]),
              static_cast<double>(snap.cumulative_counts[i]));
  }
  WriteLine(out, name, "_count", labels, "", "", static_cast<double>(snap.count));
  if (snap.upper_bounds.front() >= 0) WriteLine(out, name, "_sum", labels, "", "", snap.sum);
}

}  // namespace radixserve::metrics

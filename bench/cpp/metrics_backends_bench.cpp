// Side-by-side cost of radixserve's metrics (src/metrics) and prometheus-cpp (Debian's
// prometheus-cpp-dev) on what a serving process does: counter increments and histogram
// observations on the engine and HTTP threads (one thread, and two threads on the same series),
// and one /metrics scrape of a registry shaped like SGLang's (counters, gauges and histograms,
// two label sets each). Prints ns per operation, us per scrape and the ratio prometheus-cpp / ours
// (above 1: ours is cheaper).
//
//   metrics_backends_bench [--ops N] [--rounds R]
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "metrics/registry.h"

namespace {

namespace rm = radixserve::metrics;
using Clock = std::chrono::steady_clock;

constexpr int kHistograms = 10;
constexpr int kCounters = 12;
constexpr int kGauges = 18;
constexpr int kBounds = 30;

std::vector<double> Bounds() {
  std::vector<double> b;
  double x = 0.0015;
  for (int i = 0; i < kBounds; ++i, x *= 1.5) b.push_back(x);
  return b;
}

// Values spread over every bucket, cycled so the branch predictor cannot learn one bucket.
std::vector<double> Values() {
  std::vector<double> v(1024);
  double x = 0.001;
  for (double& value : v) {
    value = x;
    x *= 1.013;
  }
  return v;
}

// Best of `rounds` of `threads` threads each running op(i) for i < ops; ns per op per thread.
double NsPerOp(int threads, int64_t ops, int rounds, const std::function<void(int64_t)>& op) {
  double best = 1e300;
  for (int r = 0; r < rounds; ++r) {
    const Clock::time_point start = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (int64_t i = 0; i < ops; ++i) op(i);
      });
    }
    for (std::thread& t : pool) t.join();
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    best = std::min(best, ns / static_cast<double>(ops));
  }
  return best;
}

double UsPerCall(int64_t calls, int rounds, const std::function<size_t()>& call) {
  double best = 1e300;
  size_t bytes = 0;
  for (int r = 0; r < rounds; ++r) {
    const Clock::time_point start = Clock::now();
    for (int64_t i = 0; i < calls; ++i) bytes += call();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    best = std::min(best, us / static_cast<double>(calls));
  }
  if (bytes == 0) std::abort();  // keeps the work observable
  return best;
}

// prefix + i + suffix (appended: GCC 12's -Wrestrict misfires on chained operator+).
std::string Name(const char* prefix, int i, const char* suffix) {
  std::string name = prefix;
  name += std::to_string(i);
  name += suffix;
  return name;
}

const std::vector<std::vector<std::string>> kLabelSets = {{"model", "0"}, {"model", "1"}};

struct Ours {
  rm::Registry registry;
  std::vector<rm::Counter*> counters;
  std::vector<rm::Histogram*> histograms;
  Ours() {
    const std::vector<std::string> labels = {"model_name", "tp_rank"};
    for (int i = 0; i < kCounters; ++i) {
      auto& f = registry.AddCounter(Name("c", i, "_total"), "A counter.", labels);
      for (const auto& values : kLabelSets) counters.push_back(&f.Labels(values));
    }
    for (int i = 0; i < kGauges; ++i) {
      auto& f = registry.AddGauge(Name("g", i, ""), "A gauge.", labels);
      for (const auto& values : kLabelSets) f.Labels(values).Set(i);
    }
    for (int i = 0; i < kHistograms; ++i) {
      auto& f = registry.AddHistogram(Name("h", i, "_seconds"), "A histogram.", labels, Bounds());
      for (const auto& values : kLabelSets) histograms.push_back(&f.Labels(values));
    }
  }
};

struct Theirs {
  prometheus::Registry registry;
  std::vector<prometheus::Counter*> counters;
  std::vector<prometheus::Histogram*> histograms;
  Theirs() {
    for (int i = 0; i < kCounters; ++i) {
      auto& f = prometheus::BuildCounter()
                    .Name(Name("c", i, "_total"))
                    .Help("A counter.")
                    .Register(registry);
      for (const auto& v : kLabelSets) {
        counters.push_back(&f.Add({{"model_name", v[0]}, {"tp_rank", v[1]}}));
      }
    }
    for (int i = 0; i < kGauges; ++i) {
      auto& f = prometheus::BuildGauge().Name(Name("g", i, "")).Help("A gauge.").Register(registry);
      for (const auto& v : kLabelSets) f.Add({{"model_name", v[0]}, {"tp_rank", v[1]}}).Set(i);
    }
    for (int i = 0; i < kHistograms; ++i) {
      auto& f = prometheus::BuildHistogram()
                    .Name(Name("h", i, "_seconds"))
                    .Help("A histogram.")
                    .Register(registry);
      for (const auto& v : kLabelSets) {
        histograms.push_back(&f.Add({{"model_name", v[0]}, {"tp_rank", v[1]}}, Bounds()));
      }
    }
  }
  std::string Expose() const { return prometheus::TextSerializer().Serialize(registry.Collect()); }
};

void Row(const char* what, double ours, double theirs) {
  std::printf("%-44s %10.1f %10.1f %8.2fx\n", what, ours, theirs, theirs / ours);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t ops = 5'000'000;
  int rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ops") == 0) ops = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
  }
  Ours ours;
  Theirs theirs;
  const std::vector<double> values = Values();
  // Every histogram and counter gets observations, so the scrape renders non-zero buckets.
  for (int64_t i = 0; i < 4096; ++i) {
    const double v = values[static_cast<size_t>(i) % values.size()];
    ours.histograms[static_cast<size_t>(i) % ours.histograms.size()]->Observe(v);
    theirs.histograms[static_cast<size_t>(i) % theirs.histograms.size()]->Observe(v);
    ours.counters[static_cast<size_t>(i) % ours.counters.size()]->Inc();
    theirs.counters[static_cast<size_t>(i) % theirs.counters.size()]->Increment();
  }
  rm::Counter& oc = *ours.counters[0];
  prometheus::Counter& tc = *theirs.counters[0];
  rm::Histogram& oh = *ours.histograms[0];
  prometheus::Histogram& th = *theirs.histograms[0];
  const auto value = [&values](int64_t i) { return values[static_cast<size_t>(i) & 1023]; };

  std::printf("%-44s %10s %10s %9s\n", "operation", "radixserve", "prom-cpp", "prom/ours");
  for (int threads : {1, 2}) {
    const char* suffix = threads == 1 ? " (ns, 1 thread)" : " (ns, 2 threads, one series)";
    Row((std::string("counter increment") += suffix).c_str(),
        NsPerOp(threads, ops, rounds, [&](int64_t) { oc.Inc(); }),
        NsPerOp(threads, ops, rounds, [&](int64_t) { tc.Increment(); }));
    Row((std::string("histogram observe") += suffix).c_str(),
        NsPerOp(threads, ops, rounds, [&](int64_t i) { oh.Observe(value(i)); }),
        NsPerOp(threads, ops, rounds, [&](int64_t i) { th.Observe(value(i)); }));
  }
  const int64_t scrapes = std::max<int64_t>(20, ops / 25'000);
  const std::string ours_text = ours.registry.Expose();
  const std::string theirs_text = theirs.Expose();
  Row("scrape: whole text (us)",
      UsPerCall(scrapes, rounds, [&] { return ours.registry.Expose().size(); }),
      UsPerCall(scrapes, rounds, [&] { return theirs.Expose().size(); }));
  const auto lines = [](const std::string& text) {
    return std::count(text.begin(), text.end(), '\n');
  };
  std::printf(
      "scrape size: radixserve %zu bytes / %td lines, prometheus-cpp %zu bytes / %td lines\n",
      ours_text.size(), lines(ours_text), theirs_text.size(), lines(theirs_text));
  return 0;
}

// radix_metrics_script: drives the metrics library from a script, for the oracle tests in
// tests/oracle/metrics/ (which replay the same script through the official Python client).
// Reads one JSON object per stdin line and writes the exposition text of the final state to
// stdout. On a bad line prints the message to stderr and exits 1.
// Operations ("op"):
//   counter | gauge | histogram   {name, help, labels: [names], buckets: [bounds] (histogram)}
//   inc | dec | set | observe     {name, labels: [values], value}
//   buckets                       {rule: [words]}: prints the bounds as a JSON array and exits
//   serving                       {options: {...ServingMetricsOptions fields}}
//   ttft | itl | finish | abort   {custom: {label: value}, value | interval, n | FinishedRequest}
//   stats | queue_time | stage    {dp_rank, SchedulerStats fields | value | stage, value}
//   http                          {endpoint, status_code, method}
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "metrics/bucket_rule.h"
#include "metrics/registry.h"
#include "metrics/serving_metrics.h"
#include "metrics/sglang_buckets.h"

namespace m = radixserve::metrics;
using Json = nlohmann::json;

namespace {

struct State {
  m::Registry registry;
  std::map<std::string, m::MetricFamily<m::Counter>*> counters;
  std::map<std::string, m::MetricFamily<m::Gauge>*> gauges;
  std::map<std::string, m::MetricFamily<m::Histogram>*> histograms;
  std::unique_ptr<m::ServingMetrics> serving;
};

template <typename T>
std::vector<T> List(const Json& j, const char* key) {
  return j.contains(key) ? j.at(key).get<std::vector<T>>() : std::vector<T>{};
}

m::ServingMetricsOptions ParseOptions(const Json& o) {
  m::ServingMetricsOptions options;
  options.model_name = o.value("model_name", "");
  options.engine_type = o.value("engine_type", "unified");
  options.tp_rank = o.value("tp_rank", 0);
  options.pp_rank = o.value("pp_rank", 0);
  options.label_dp_rank = o.value("label_dp_rank", false);
  if (o.contains("bucket_time_to_first_token")) {
    options.bucket_time_to_first_token = List<double>(o, "bucket_time_to_first_token");
  }
  if (o.contains("bucket_inter_token_latency")) {
    options.bucket_inter_token_latency = List<double>(o, "bucket_inter_token_latency");
  }
  if (o.contains("bucket_e2e_request_latency")) {
    options.bucket_e2e_request_latency = List<double>(o, "bucket_e2e_request_latency");
  }
  options.collect_tokens_histogram = o.value("collect_tokens_histogram", false);
  options.prompt_tokens_buckets = List<std::string>(o, "prompt_tokens_buckets");
  options.generation_tokens_buckets = List<std::string>(o, "generation_tokens_buckets");
  options.allowed_customer_labels = List<std::string>(o, "allowed_customer_labels");
  return options;
}

m::SchedulerStats ParseStats(const Json& j) {
  m::SchedulerStats s;
  s.num_running_reqs = j.value("num_running_reqs", int64_t{0});
  s.num_used_tokens = j.value("num_used_tokens", int64_t{0});
  s.token_usage = j.value("token_usage", 0.0);
  s.gen_throughput = j.value("gen_throughput", 0.0);
  s.num_queue_reqs = j.value("num_queue_reqs", int64_t{0});
  s.cache_hit_rate = j.value("cache_hit_rate", 0.0);
  s.max_total_num_tokens = j.value("max_total_num_tokens", int64_t{0});
  s.decode_sum_seq_lens = j.value("decode_sum_seq_lens", int64_t{0});
  s.new_token_ratio = j.value("new_token_ratio", 0.0);
  s.num_retracted_reqs = j.value("num_retracted_reqs", int64_t{0});
  s.engine_startup_time = j.value("engine_startup_time", 0.0);
  s.engine_load_weights_time = j.value("engine_load_weights_time", 0.0);
  if (j.contains("max_running_requests_under_SLO")) {
    s.max_running_requests_under_slo = j.at("max_running_requests_under_SLO").get<int64_t>();
  }
  return s;
}

// Returns an error message, or "" when the line was applied.
std::string Apply(State& st, const Json& j) {
  const std::string op = j.at("op").get<std::string>();
  const std::string name = j.value("name", "");
  const auto label_list = List<std::string>(j, "labels");
  if (op == "counter") {
    st.counters[name] = &st.registry.AddCounter(name, j.value("help", ""), label_list);
  } else if (op == "gauge") {
    st.gauges[name] = &st.registry.AddGauge(name, j.value("help", ""), label_list);
  } else if (op == "histogram") {
    st.histograms[name] = &st.registry.AddHistogram(name, j.value("help", ""), label_list,
                                                    List<double>(j, "buckets"));
  } else if (op == "inc" || op == "dec" || op == "set" || op == "observe") {
    const double value = j.value("value", 1.0);
    if (auto it = st.counters.find(name); it != st.counters.end() && op == "inc") {
      it->second->Labels(label_list).Inc(value);
    } else if (auto g = st.gauges.find(name); g != st.gauges.end()) {
      m::Gauge& gauge = g->second->Labels(label_list);
      if (op == "inc") gauge.Inc(value);
      if (op == "dec") gauge.Dec(value);
      if (op == "set") gauge.Set(value);
    } else if (auto h = st.histograms.find(name); h != st.histograms.end() && op == "observe") {
      h->second->Labels(label_list).Observe(value);
    } else {
      return "no metric '" + name + "' for op " + op;
    }
  } else if (op == "serving") {
    auto created = m::ServingMetrics::Create(ParseOptions(j.value("options", Json::object())));
    if (!created.ok()) return created.status().message();
    st.serving = std::move(created).value();
  } else {
    if (!st.serving) return "unknown op or no 'serving' yet: " + op;
    const auto custom = j.value("custom", std::map<std::string, std::string>{});
    m::RequestMetrics& req = st.serving->Requests(custom);
    m::SchedulerMetrics& sched = st.serving->Scheduler(j.value("dp_rank", 0));
    if (op == "ttft") {
      req.ObserveTimeToFirstToken(j.at("value").get<double>());
    } else if (op == "itl") {
      req.ObserveInterTokenLatency(j.at("interval").get<double>(), j.at("n").get<int64_t>());
    } else if (op == "finish") {
      m::FinishedRequest r;
      r.prompt_tokens = j.value("prompt_tokens", int64_t{0});
      r.generation_tokens = j.value("generation_tokens", int64_t{0});
      r.cached_tokens = j.value("cached_tokens", int64_t{0});
      r.e2e_latency_s = j.value("e2e_latency", 0.0);
      r.has_grammar = j.value("has_grammar", false);
      r.retraction_count = j.value("retraction_count", int64_t{0});
      req.ObserveFinishedRequest(r);
    } else if (op == "abort") {
      req.ObserveAbortedRequest();
    } else if (op == "stats") {
      sched.LogStats(ParseStats(j));
    } else if (op == "queue_time") {
      sched.ObserveQueueTime(j.at("value").get<double>());
    } else if (op == "http") {
      st.serving->CountHttpResponse(j.at("endpoint").get<std::string>(),
                                    j.at("status_code").get<int>(),
                                    j.at("method").get<std::string>());
    } else if (op == "stage") {
      sched.ObservePerStageLatency(j.at("stage").get<std::string>(), j.at("value").get<double>());
    } else {
      return "unknown op: " + op;
    }
  }
  return "";
}

}  // namespace

int main() {
  State state;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("op")) {
      std::cerr << "bad script line: " << line << '\n';
      return 1;
    }
    if (j.at("op") == "buckets") {
      auto bounds = m::GenerateBuckets(List<std::string>(j, "rule"), m::DefaultTokensBuckets());
      if (!bounds.ok()) {
        std::cerr << bounds.status().message() << '\n';
        return 1;
      }
      std::cout << Json(*bounds).dump() << '\n';
      return 0;
    }
    std::string error;
    try {
      error = Apply(state, j);
    } catch (const Json::exception& e) {
      error = e.what();
    }
    if (!error.empty()) {
      std::cerr << error << '\n';
      return 1;
    }
  }
  std::cout << (state.serving ? state.serving->Expose() : state.registry.Expose());
  return 0;
}

// RequestMetrics: SGLang's tokenizer-side series (labels model_name plus the allowed customer
// labels) for one set of label values: token and request counters, TTFT / inter-token / e2e
// latency, token-count and retraction histograms. Obtained from ServingMetrics::Requests().
//
// Thread-safety: every method may be called from any thread; after the first call of each kind
// the path is lock-free (atomics only). The object lives as long as its ServingMetrics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "metrics/counter.h"
#include "metrics/histogram.h"
#include "metrics/lazy_child.h"
#include "metrics/metric_family.h"

namespace radixserve::metrics {

// The families behind RequestMetrics, registered once by ServingMetrics. The token histograms are
// null unless --collect-tokens-histogram.
struct RequestFamilies {
  MetricFamily<Counter>* prompt_tokens_total = nullptr;
  MetricFamily<Counter>* generation_tokens_total = nullptr;
  MetricFamily<Counter>* cached_tokens_total = nullptr;
  MetricFamily<Counter>* num_requests_total = nullptr;
  MetricFamily<Counter>* num_so_requests_total = nullptr;
  MetricFamily<Counter>* num_aborted_requests_total = nullptr;
  MetricFamily<Histogram>* time_to_first_token = nullptr;
  MetricFamily<Histogram>* inter_token_latency = nullptr;
  MetricFamily<Histogram>* e2e_request_latency = nullptr;
  MetricFamily<Histogram>* num_retractions = nullptr;
  MetricFamily<Histogram>* prompt_tokens_histogram = nullptr;
  MetricFamily<Histogram>* generation_tokens_histogram = nullptr;
};

// What the engine knows when a request finishes (any finish reason, aborts included).
struct FinishedRequest {
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  int64_t cached_tokens = 0;     // prefix-cache hits of the prompt
  double e2e_latency_s = 0;      // finish time - arrival time
  bool has_grammar = false;      // structured output (json_schema, regex, ebnf)
  int64_t retraction_count = 0;  // times the request was retracted
};

class RequestMetrics {
 public:
  RequestMetrics(const RequestFamilies& families, const std::vector<std::string>& label_values);
  RequestMetrics(const RequestMetrics&) = delete;
  RequestMetrics& operator=(const RequestMetrics&) = delete;

  // Once per request: arrival to first output, in seconds.
  void ObserveTimeToFirstToken(double seconds);

  // One output step of a request that produced `new_tokens` (> 0) tokens `interval_s` seconds
  // after its previous output: counts `new_tokens` observations of interval_s / new_tokens and
  // adds interval_s to the sum (SGLang's accounting). new_tokens <= 0 records nothing.
  void ObserveInterTokenLatency(double interval_s, int64_t new_tokens);

  // Token and request counters, e2e latency, retraction count, optional token histograms.
  // cached_tokens_total only moves when cached_tokens > 0, as in SGLang.
  void ObserveFinishedRequest(const FinishedRequest& request);

  // sglang:num_aborted_requests_total, once per abort request handled.
  void ObserveAbortedRequest();

 private:
  LazyChild<Counter> prompt_tokens_total_;
  LazyChild<Counter> generation_tokens_total_;
  LazyChild<Counter> cached_tokens_total_;
  LazyChild<Counter> num_requests_total_;
  LazyChild<Counter> num_so_requests_total_;
  LazyChild<Counter> num_aborted_requests_total_;
  LazyChild<Histogram> time_to_first_token_;
  LazyChild<Histogram> inter_token_latency_;
  LazyChild<Histogram> e2e_request_latency_;
  LazyChild<Histogram> num_retractions_;
  bool collect_tokens_histogram_;
  LazyChild<Histogram> prompt_tokens_histogram_;
  LazyChild<Histogram> generation_tokens_histogram_;
};

}  // namespace radixserve::metrics

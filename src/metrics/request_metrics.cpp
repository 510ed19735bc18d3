#include "metrics/request_metrics.h"

namespace radixserve::metrics {

RequestMetrics::RequestMetrics(const RequestFamilies& f, const std::vector<std::string>& values)
    : prompt_tokens_total_(f.prompt_tokens_total, values),
      generation_tokens_total_(f.generation_tokens_total, values),
      cached_tokens_total_(f.cached_tokens_total, values),
      num_requests_total_(f.num_requests_total, values),
      num_so_requests_total_(f.num_so_requests_total, values),
      num_aborted_requests_total_(f.num_aborted_requests_total, values),
      time_to_first_token_(f.time_to_first_token, values),
      inter_token_latency_(f.inter_token_latency, values),
      e2e_request_latency_(f.e2e_request_latency, values),
      num_retractions_(f.num_retractions, values),
      collect_tokens_histogram_(f.prompt_tokens_histogram != nullptr),
      prompt_tokens_histogram_(f.prompt_tokens_histogram, values),
      generation_tokens_histogram_(f.generation_tokens_histogram, values) {}

void RequestMetrics::ObserveTimeToFirstToken(double seconds) {
  time_to_first_token_.Get().Observe(seconds);
}

void RequestMetrics::ObserveInterTokenLatency(double interval_s, int64_t new_tokens) {
  if (new_tokens <= 0) return;
  inter_token_latency_.Get().ObserveMany(interval_s / static_cast<double>(new_tokens),
                                         static_cast<uint64_t>(new_tokens), interval_s);
}

void RequestMetrics::ObserveFinishedRequest(const FinishedRequest& r) {
  prompt_tokens_total_.Get().Inc(static_cast<double>(r.prompt_tokens));
  generation_tokens_total_.Get().Inc(static_cast<double>(r.generation_tokens));
  if (r.cached_tokens > 0) cached_tokens_total_.Get().Inc(static_cast<double>(r.cached_tokens));
  num_requests_total_.Get().Inc();
  if (r.has_grammar) num_so_requests_total_.Get().Inc();
  e2e_request_latency_.Get().Observe(r.e2e_latency_s);
  if (collect_tokens_histogram_) {
    prompt_tokens_histogram_.Get().Observe(static_cast<double>(r.prompt_tokens));
    generation_tokens_histogram_.Get().Observe(static_cast<double>(r.generation_tokens));
  }
  num_retractions_.Get().Observe(static_cast<double>(r.retraction_count));
}

void RequestMetrics::ObserveAbortedRequest() { num_aborted_requests_total_.Get().Inc(); }

}  // namespace radixserve::metrics

#include "metrics/scheduler_metrics.h"

#include <iterator>

#include "common/check.h"

namespace radixserve::metrics {
namespace {

// The gauges LogStats sets unconditionally; StatValues() lists their values in the same order.
constexpr MetricFamily<Gauge>* SchedulerFamilies::*kGauges[] = {
    &SchedulerFamilies::num_running_reqs,
    &SchedulerFamilies::num_used_tokens,
    &SchedulerFamilies::token_usage,
    &SchedulerFamilies::pending_prealloc_token_usage,
    &SchedulerFamilies::swa_token_usage,
    &SchedulerFamilies::mamba_usage,
    &SchedulerFamilies::decode_sum_seq_lens,
    &SchedulerFamilies::gen_throughput,
    &SchedulerFamilies::num_queue_reqs,
    &SchedulerFamilies::num_grammar_queue_reqs,
    &SchedulerFamilies::num_running_reqs_offline_batch,
    &SchedulerFamilies::cache_hit_rate,
    &SchedulerFamilies::max_total_num_tokens,
    &SchedulerFamilies::spec_accept_length,
    &SchedulerFamilies::spec_accept_rate,
    &SchedulerFamilies::num_retracted_reqs,
    &SchedulerFamilies::num_paused_reqs,
    &SchedulerFamilies::utilization,
    &SchedulerFamilies::engine_startup_time,
    &SchedulerFamilies::engine_load_weights_time,
    &SchedulerFamilies::new_token_ratio,
    &SchedulerFamilies::is_cuda_graph,
};
constexpr size_t kNumGauges = std::size(kGauges);

std::vector<double> StatValues(const SchedulerStats& s) {
  auto d = [](int64_t v) { return static_cast<double>(v); };
  return {d(s.num_running_reqs),
          d(s.num_used_tokens),
          s.token_usage,
          s.pending_prealloc_token_usage,
          s.swa_token_usage,
          s.mamba_usage,
          d(s.decode_sum_seq_lens),
          s.gen_throughput,
          d(s.num_queue_reqs),
          d(s.num_grammar_queue_reqs),
          d(s.num_running_reqs_offline_batch),
          s.cache_hit_rate,
          d(s.max_total_num_tokens),
          s.spec_accept_length,
          s.spec_accept_rate,
          d(s.num_retracted_reqs),
          d(s.num_paused_reqs),
          s.utilization,
          s.engine_startup_time,
          s.engine_load_weights_time,
          s.new_token_ratio,
          s.is_cuda_graph ? 1.0 : 0.0};
}

}  // namespace

SchedulerMetrics::SchedulerMetrics(const SchedulerFamilies& families,
                                   std::vector<std::string> label_values)
    : label_values_(std::move(label_values)),
      max_running_requests_under_slo_(families.max_running_requests_under_slo, label_values_),
      queue_time_(families.queue_time, label_values_),
      per_stage_req_latency_(families.per_stage_req_latency) {
  for (auto member : kGauges) {
    RADIX_CHECK(families.*member != nullptr);
    gauges_.push_back(std::make_unique<LazyChild<Gauge>>(families.*member, label_values_));
  }
}

void SchedulerMetrics::LogStats(const SchedulerStats& stats) {
  const std::vector<double> values = StatValues(stats);
  RADIX_CHECK(values.size() == kNumGauges);
  for (size_t i = 0; i < kNumGauges; ++i) gauges_[i]->Get().Set(values[i]);
  if (stats.max_running_requests_under_slo.has_value()) {
    max_running_requests_under_slo_.Get().Set(
        static_cast<double>(*stats.max_running_requests_under_slo));
  }
}

void SchedulerMetrics::ObserveQueueTime(double seconds) { queue_time_.Get().Observe(seconds); }

void SchedulerMetrics::ObservePerStageLatency(const std::string& stage, double seconds) {
  std::vector<std::string> values = label_values_;
  values.push_back(stage);
  per_stage_req_latency_->Labels(values).Observe(seconds);
}

}  // namespace radixserve::metrics

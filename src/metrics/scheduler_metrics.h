// SchedulerMetrics: SGLang's scheduler-side series for one engine replica (labels model_name,
// engine_type, tp_rank, pp_rank and, with data parallelism, dp_rank): the state gauges refreshed
// at every prefill / decode log and while idle, the queue-time and per-stage latency histograms.
// Obtained from ServingMetrics::Scheduler().
//
// Thread-safety: meant for the replica's engine thread, but every method is safe from any thread;
// after first use each series is updated lock-free. Lives as long as its ServingMetrics.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "metrics/gauge.h"
#include "metrics/histogram.h"
#include "metrics/lazy_child.h"
#include "metrics/metric_family.h"

namespace radixserve::metrics {

// A snapshot of scheduler state, the fields of SGLang's SchedulerStats that a CPU engine has.
struct SchedulerStats {
  int64_t num_running_reqs = 0;
  int64_t num_used_tokens = 0;  // KV slots held, locked cache included
  double token_usage = 0;       // (max_total - available - evictable) / max_total
  double pending_prealloc_token_usage = 0;
  double swa_token_usage = 0;
  double mamba_usage = 0;
  int64_t decode_sum_seq_lens = 0;
  double gen_throughput = 0;  // tokens/s since the previous decode log
  int64_t num_queue_reqs = 0;
  int64_t num_grammar_queue_reqs = 0;
  int64_t num_running_reqs_offline_batch = 0;
  double cache_hit_rate = 0;  // per prefill batch: hit / (hit + new); 0 at decode logs
  int64_t max_total_num_tokens = 0;
  double spec_accept_length = 0;
  double spec_accept_rate = 0;
  int64_t num_retracted_reqs = 0;
  int64_t num_paused_reqs = 0;
  double utilization = 0;
  std::optional<int64_t> max_running_requests_under_slo;  // exported only when known
  double engine_startup_time = 0;                         // seconds
  double engine_load_weights_time = 0;                    // seconds
  double new_token_ratio = 0;
  bool is_cuda_graph = false;  // always false on CPU
};

// The families behind SchedulerMetrics, registered once by ServingMetrics.
struct SchedulerFamilies {
  MetricFamily<Gauge>* num_running_reqs = nullptr;
  MetricFamily<Gauge>* num_used_tokens = nullptr;
  MetricFamily<Gauge>* token_usage = nullptr;
  MetricFamily<Gauge>* pending_prealloc_token_usage = nullptr;
  MetricFamily<Gauge>* swa_token_usage = nullptr;
  MetricFamily<Gauge>* mamba_usage = nullptr;
  MetricFamily<Gauge>* decode_sum_seq_lens = nullptr;
  MetricFamily<Gauge>* gen_throughput = nullptr;
  MetricFamily<Gauge>* num_queue_reqs = nullptr;
  MetricFamily<Gauge>* num_grammar_queue_reqs = nullptr;
  MetricFamily<Gauge>* num_running_reqs_offline_batch = nullptr;
  MetricFamily<Gauge>* cache_hit_rate = nullptr;
  MetricFamily<Gauge>* max_total_num_tokens = nullptr;
  MetricFamily<Gauge>* spec_accept_length = nullptr;
  MetricFamily<Gauge>* spec_accept_rate = nullptr;
  MetricFamily<Gauge>* num_retracted_reqs = nullptr;
  MetricFamily<Gauge>* num_paused_reqs = nullptr;
  MetricFamily<Gauge>* utilization = nullptr;
  MetricFamily<Gauge>* max_running_requests_under_slo = nullptr;
  MetricFamily<Gauge>* engine_startup_time = nullptr;
  MetricFamily<Gauge>* engine_load_weights_time = nullptr;
  MetricFamily<Gauge>* new_token_ratio = nullptr;
  MetricFamily<Gauge>* is_cuda_graph = nullptr;
  MetricFamily<Histogram>* queue_time = nullptr;
  MetricFamily<Histogram>* per_stage_req_latency = nullptr;  // extra label "stage"
};

class SchedulerMetrics {
 public:
  SchedulerMetrics(const SchedulerFamilies& families, std::vector<std::string> label_values);
  SchedulerMetrics(const SchedulerMetrics&) = delete;
  SchedulerMetrics& operator=(const SchedulerMetrics&) = delete;

  // Sets every gauge from `stats` (max_running_requests_under_SLO only when present).
  void LogStats(const SchedulerStats& stats);

  // Waiting-queue entry to first forward of one request, in seconds.
  void ObserveQueueTime(double seconds);

  // Latency of one request stage ("prefill_waiting", "prefill_forward", "decode_loop", ...).
  void ObservePerStageLatency(const std::string& stage, double seconds);

 private:
  const std::vector<std::string> label_values_;
  // One per gauge that LogStats always sets, in the order of kGauges in scheduler_metrics.cpp.
  std::vector<std::unique_ptr<LazyChild<Gauge>>> gauges_;
  LazyChild<Gauge> max_running_requests_under_slo_;
  LazyChild<Histogram> queue_time_;
  MetricFamily<Histogram>* per_stage_req_latency_;
};

}  // namespace radixserve::metrics

// ServingMetrics: everything radixserve exports at /metrics under --enable-metrics, with SGLang's
// metric names, types, labels and buckets (see ../shared/reference/sglang-runtime.md section 6).
// It owns the Registry; the HTTP layer serves Expose() (content type Registry::kContentType) and
// counts responses with CountHttpResponse(); other layers may add families to registry().
//
//   tokenizer side, labels model_name + allowed customer labels       -> RequestMetrics
//   scheduler side, labels model_name, engine_type, tp_rank, pp_rank
//                   [, dp_rank]                                        -> SchedulerMetrics
//
// Threads: Requests() and Scheduler() may be called from any thread; they return objects that
// live as long as this ServingMetrics. Callers on hot paths should keep the returned reference.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "metrics/registry.h"
#include "metrics/request_metrics.h"
#include "metrics/scheduler_metrics.h"

namespace radixserve::metrics {

// Plain options; the lead maps ServerArgs onto them.
struct ServingMetricsOptions {
  std::string model_name{};             // --served-model-name, else the model path
  std::string engine_type = "unified";  // SGLang's disaggregation-mode label
  int tp_rank = 0;
  int pp_rank = 0;
  bool label_dp_rank = false;  // add the dp_rank label (data-parallel replicas)
  // --bucket-time-to-first-token / --bucket-inter-token-latency / --bucket-e2e-request-latency;
  // nullopt keeps SGLang's defaults. Given lists must be strictly increasing.
  std::optional<std::vector<double>> bucket_time_to_first_token{};
  std::optional<std::vector<double>> bucket_inter_token_latency{};
  std::optional<std::vector<double>> bucket_e2e_request_latency{};
  // --collect-tokens-histogram, and the rule words of --prompt-tokens-buckets and
  // --generation-tokens-buckets (see bucket_rule.h; empty means 'default').
  bool collect_tokens_histogram = false;
  std::vector<std::string> prompt_tokens_buckets{};
  std::vector<std::string> generation_tokens_buckets{};
  // --tokenizer-metrics-allowed-customer-labels: extra tokenizer-side label names.
  std::vector<std::string> allowed_customer_labels{};
  // --hicache-storage-backend ("" without a storage tier): SGLang's storage counters exist only
  // with one, labeled by it.
  std::string storage_backend{};
};

// Totals of the hierarchical cache's storage tier since start (one replica).
struct StorageStats {
  int64_t prefetched_tokens = 0;  // tokens loaded from storage into the RAM cache
  int64_t backuped_tokens = 0;    // tokens written to storage
  // Cumulative per-bucket counts (the last bucket +Inf) and sums, over StoragePagesBuckets()
  // and StorageBandwidthBuckets() (sglang_buckets.h).
  struct Distribution {
    std::vector<uint64_t> counts;
    double sum = 0.0;
  };
  Distribution prefetch_pgs, backup_pgs, prefetch_bandwidth, backup_bandwidth;
};

class ServingMetrics {
 public:
  // Registers every family. InvalidArgument (naming the flag) for bad bucket lists or rules, or
  // an invalid / reserved customer label name.
  static Expected<std::unique_ptr<ServingMetrics>> Create(const ServingMetricsOptions& options);

  ServingMetrics(const ServingMetrics&) = delete;
  ServingMetrics& operator=(const ServingMetrics&) = delete;

  // Tokenizer-side series for a request's customer labels (e.g. parsed from the
  // x-customer-labels header). Keys not in allowed_customer_labels are ignored; allowed labels the
  // request lacks get "". Each distinct value set is a new series: callers should not feed
  // unbounded client-controlled values without an allow-list.
  RequestMetrics& Requests(const std::map<std::string, std::string>& customer_labels = {});

  // Scheduler-side series of one replica; dp_rank is used only when options.label_dp_rank.
  SchedulerMetrics& Scheduler(int dp_rank = 0);

  // sglang:http_responses_total{endpoint, status_code, method}: one response sent. Any thread;
  // takes a lock (one label lookup), which is fine at HTTP-response rate.
  void CountHttpResponse(const std::string& endpoint, int status_code, const std::string& method);

  // Moves SGLang's storage counters (sglang:prefetched_tokens_total, sglang:backuped_tokens_total)
  // and histograms (sglang:prefetch_pgs, backup_pgs, prefetch_bandwidth, backup_bandwidth) up to
  // these totals. A no-op without a storage backend.
  void LogStorageStats(const StorageStats& stats, int dp_rank = 0);

  Registry& registry() { return registry_; }
  std::string Expose() const { return registry_.Expose(); }

 private:
  ServingMetrics() = default;
  Status Register(const ServingMetricsOptions& options);

  ServingMetricsOptions options_;
  Registry registry_;
  RequestFamilies request_families_;
  SchedulerFamilies scheduler_families_;
  MetricFamily<Counter>* http_responses_total_ = nullptr;
  MetricFamily<Counter>* prefetched_tokens_total_ = nullptr;
  MetricFamily<Counter>* backuped_tokens_total_ = nullptr;
  MetricFamily<Histogram>* prefetch_pgs_ = nullptr;
  MetricFamily<Histogram>* backup_pgs_ = nullptr;
  MetricFamily<Histogram>* prefetch_bandwidth_ = nullptr;
  MetricFamily<Histogram>* backup_bandwidth_ = nullptr;
  std::mutex mutex_;
  std::map<std::vector<std::string>, std::unique_ptr<RequestMetrics>> requests_;
  std::map<int, std::unique_ptr<SchedulerMetrics>> schedulers_;
};

}  // namespace radixserve::metrics

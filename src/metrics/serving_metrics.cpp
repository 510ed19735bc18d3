#include "metrics/serving_metrics.h"

#include <cmath>

#include "metrics/bucket_rule.h"
#include "metrics/sglang_buckets.h"
#include "metrics/text_format.h"

namespace radixserve::metrics {
namespace {

Expected<std::vector<double>> PickBounds(const std::optional<std::vector<double>>& given,
                                         const std::vector<double>& fallback,
                                         const std::string& flag) {
  if (!given.has_value()) return fallback;
  Status status = ValidateBucketBounds(*given);
  if (!status.ok()) return InvalidArgument("--" + flag + ": " + status.message());
  return *given;
}

Expected<std::vector<double>> RuleBounds(const std::vector<std::string>& words,
                                         const std::string& flag) {
  auto bounds = GenerateBuckets(words, DefaultTokensBuckets());
  if (!bounds.ok()) return InvalidArgument("--" + flag + ": " + bounds.status().message());
  return bounds;
}

}  // namespace

Expected<std::unique_ptr<ServingMetrics>> ServingMetrics::Create(
    const ServingMetricsOptions& options) {
  std::unique_ptr<ServingMetrics> metrics(new ServingMetrics());
  RADIX_RETURN_IF_ERROR(metrics->Register(options));
  return metrics;
}

Status ServingMetrics::Register(const ServingMetricsOptions& options) {
  options_ = options;
  std::vector<std::string> request_labels = {"model_name"};
  for (const std::string& name : options.allowed_customer_labels) {
    if (!IsValidLabelName(name)) {
      return InvalidArgument("--tokenizer-metrics-allowed-customer-labels: '" + name +
                             "' is not a valid Prometheus label name");
    }
    for (const std::string& seen : request_labels) {
      if (seen == name) {
        return InvalidArgument("--tokenizer-metrics-allowed-customer-labels: label '" + name +
                               "' is repeated or reserved");
      }
    }
    request_labels.push_back(name);
  }
  RADIX_ASSIGN_OR_RETURN(
      auto ttft, PickBounds(options.bucket_time_to_first_token, DefaultTimeToFirstTokenBuckets(),
                            "bucket-time-to-first-token"));
  RADIX_ASSIGN_OR_RETURN(
      auto itl, PickBounds(options.bucket_inter_token_latency, DefaultInterTokenLatencyBuckets(),
                           "bucket-inter-token-latency"));
  RADIX_ASSIGN_OR_RETURN(
      auto e2e, PickBounds(options.bucket_e2e_request_latency, DefaultE2eRequestLatencyBuckets(),
                           "bucket-e2e-request-latency"));
  std::vector<double> prompt_bounds, generation_bounds;
  if (options.collect_tokens_histogram) {
    RADIX_ASSIGN_OR_RETURN(auto prompt,
                           RuleBounds(options.prompt_tokens_buckets, "prompt-tokens-buckets"));
    RADIX_ASSIGN_OR_RETURN(auto generation, RuleBounds(options.generation_tokens_buckets,
                                                       "generation-tokens-buckets"));
    prompt_bounds = std::move(prompt);
    generation_bounds = std::move(generation);
  }

  // Tokenizer side, in SGLang's registration order.
  Registry& r = registry_;
  RequestFamilies& q = request_families_;
  q.prompt_tokens_total =
      &r.AddCounter("sglang:prompt_tokens_total", "Prompt (prefill) tokens of finished requests.",
                    request_labels);
  q.generation_tokens_total = &r.AddCounter(
      "sglang:generation_tokens_total", "Generated tokens of finished requests.", request_labels);
  if (options.collect_tokens_histogram) {
    q.prompt_tokens_histogram =
        &r.AddHistogram("sglang:prompt_tokens_histogram", "Distribution of prompt lengths.",
                        request_labels, prompt_bounds);
    q.generation_tokens_histogram =
        &r.AddHistogram("sglang:generation_tokens_histogram", "Distribution of generated lengths.",
                        request_labels, generation_bounds);
  }
  q.cached_tokens_total = &r.AddCounter(
      "sglang:cached_tokens_total", "Prompt tokens served from the prefix cache.", request_labels);
  q.num_requests_total =
      &r.AddCounter("sglang:num_requests_total", "Finished requests.", request_labels);
  q.num_so_requests_total = &r.AddCounter("sglang:num_so_requests_total",
                                          "Finished structured-output requests.", request_labels);
  q.num_aborted_requests_total =
      &r.AddCounter("sglang:num_aborted_requests_total", "Aborted requests.", request_labels);
  q.time_to_first_token =
      &r.AddHistogram("sglang:time_to_first_token_seconds",
                      "Seconds from request arrival to its first output.", request_labels, ttft);
  q.inter_token_latency =
      &r.AddHistogram("sglang:inter_token_latency_seconds",
                      "Seconds between consecutive output tokens.", request_labels, itl);
  q.e2e_request_latency =
      &r.AddHistogram("sglang:e2e_request_latency_seconds",
                      "Seconds from request arrival to its finish.", request_labels, e2e);
  q.num_retractions =
      &r.AddHistogram("sglang:num_retractions", "Times each finished request was retracted.",
                      request_labels, DefaultRetractionsBuckets());

  // Scheduler side.
  std::vector<std::string> sched_labels = {"model_name", "engine_type", "tp_rank", "pp_rank"};
  if (options.label_dp_rank) sched_labels.push_back("dp_rank");
  SchedulerFamilies& s = scheduler_families_;
  auto gauge = [&](const char* name, const char* help) {
    return &r.AddGauge(name, help, sched_labels);
  };
  s.num_running_reqs = gauge("sglang:num_running_reqs", "Requests in the running batch.");
  s.num_used_tokens = gauge("sglang:num_used_tokens", "KV cache slots in use.");
  s.token_usage = gauge("sglang:token_usage", "Fraction of the KV cache in use.");
  s.pending_prealloc_token_usage = gauge("sglang:pending_prealloc_token_usage",
                                         "Fraction of the KV cache awaiting preallocation.");
  s.swa_token_usage =
      gauge("sglang:swa_token_usage", "Fraction of the sliding-window KV cache in use.");
  s.mamba_usage = gauge("sglang:mamba_usage", "Fraction of the Mamba state cache in use.");
  s.decode_sum_seq_lens =
      gauge("sglang:decode_sum_seq_lens", "Sum of sequence lengths in the decode batch.");
  s.gen_throughput = gauge("sglang:gen_throughput", "Generation throughput in tokens/s.");
  s.num_queue_reqs = gauge("sglang:num_queue_reqs", "Requests in the waiting queue.");
  s.num_grammar_queue_reqs =
      gauge("sglang:num_grammar_queue_reqs", "Requests waiting for grammar compilation.");
  s.num_running_reqs_offline_batch = gauge("sglang:num_running_reqs_offline_batch",
                                           "Running low-priority offline batch requests.");
  s.cache_hit_rate = gauge("sglang:cache_hit_rate", "Prefix cache hit rate of the last prefill.");
  s.max_total_num_tokens =
      gauge("sglang:max_total_num_tokens", "Capacity of the KV cache pool in tokens.");
  s.spec_accept_length =
      gauge("sglang:spec_accept_length", "Mean accepted length in speculative decoding.");
  s.spec_accept_rate =
      gauge("sglang:spec_accept_rate", "Accepted share of draft tokens in speculative decoding.");
  s.num_retracted_reqs = gauge("sglang:num_retracted_reqs", "Requests retracted.");
  s.num_paused_reqs = gauge("sglang:num_paused_reqs", "Requests paused.");
  s.utilization = gauge("sglang:utilization", "Engine utilization.");
  s.max_running_requests_under_slo =
      gauge("sglang:max_running_requests_under_SLO", "Running-request limit that meets the SLO.");
  s.engine_startup_time = gauge("sglang:engine_startup_time", "Engine startup seconds.");
  s.engine_load_weights_time =
      gauge("sglang:engine_load_weights_time", "Seconds spent loading weights.");
  s.new_token_ratio = gauge("sglang:new_token_ratio", "Current new-token ratio estimate.");
  s.is_cuda_graph = gauge("sglang:is_cuda_graph", "1 if the last batch ran a captured graph.");
  s.queue_time = &r.AddHistogram("sglang:queue_time_seconds",
                                 "Seconds a request waited in the queue before its first forward.",
                                 sched_labels, DefaultQueueTimeBuckets());
  std::vector<std::string> stage_labels = sched_labels;
  stage_labels.push_back("stage");
  s.per_stage_req_latency =
      &r.AddHistogram("sglang:per_stage_req_latency_seconds", "Seconds spent per request stage.",
                      stage_labels, DefaultPerStageLatencyBuckets());

  http_responses_total_ = &r.AddCounter("sglang:http_responses_total", "HTTP responses sent.",
                                        {"endpoint", "status_code", "method"});
  if (!options.storage_backend.empty()) {
    const std::vector<std::string> storage_labels = {"storage_backend", "tp_rank", "dp_rank"};
    prefetched_tokens_total_ = &r.AddCounter("sglang:prefetched_tokens_total",
                                             "Number of prefetched prompt tokens.", storage_labels);
    backuped_tokens_total_ =
        &r.AddCounter("sglang:backuped_tokens_total", "Number of backuped tokens.", storage_labels);
    prefetch_pgs_ =
        &r.AddHistogram("sglang:prefetch_pgs", "Histogram of prefetch pages of batches.",
                        storage_labels, StoragePagesBuckets());
    backup_pgs_ = &r.AddHistogram("sglang:backup_pgs", "Histogram of backup pages of batches.",
                                  storage_labels, StoragePagesBuckets());
    prefetch_bandwidth_ =
        &r.AddHistogram("sglang:prefetch_bandwidth", "Histogram of prefetch bandwidth in GB/s.",
                        storage_labels, StorageBandwidthBuckets());
    backup_bandwidth_ =
        &r.AddHistogram("sglang:backup_bandwidth", "Histogram of backup bandwidth in GB/s.",
                        storage_labels, StorageBandwidthBuckets());
  }
  return Status::Ok();
}

void ServingMetrics::LogStorageStats(const StorageStats& stats, int dp_rank) {
  if (prefetched_tokens_total_ == nullptr) return;
  const std::vector<std::string> labels = {options_.storage_backend, "0", std::to_string(dp_rank)};
  // Scrapes read totals; a counter moves by what is new since the last one.
  const auto advance = [&](MetricFamily<Counter>* family, int64_t total) {
    Counter& counter = family->Labels(labels);
    const double delta = static_cast<double>(total) - counter.Value();
    if (delta > 0) counter.Inc(delta);
  };
  advance(prefetched_tokens_total_, stats.prefetched_tokens);
  advance(backuped_tokens_total_, stats.backuped_tokens);
  // Each bucket gets the observations it gained since the last scrape.
  const auto catch_up = [&](MetricFamily<Histogram>* family,
                            const StorageStats::Distribution& totals) {
    Histogram& histogram = family->Labels(labels);
    const HistogramSnapshot seen = histogram.Snapshot();
    const std::vector<double>& bounds = histogram.upper_bounds();
    if (totals.counts.size() != bounds.size()) return;
    bool first = true;
    uint64_t below = 0;
    for (size_t i = 0; i < bounds.size(); ++i) {
      const uint64_t had = seen.cumulative_counts[i] - below;
      below = seen.cumulative_counts[i];
      if (totals.counts[i] <= had) continue;
      // A value inside bucket i: its bound, or above the last finite one for +Inf.
      const double inside = std::isinf(bounds[i]) ? bounds[i - 1] * 2 : bounds[i];
      histogram.ObserveMany(inside, totals.counts[i] - had, first ? totals.sum - seen.sum : 0.0);
      first = false;
    }
  };
  catch_up(prefetch_pgs_, stats.prefetch_pgs);
  catch_up(backup_pgs_, stats.backup_pgs);
  catch_up(prefetch_bandwidth_, stats.prefetch_bandwidth);
  catch_up(backup_bandwidth_, stats.backup_bandwidth);
}

void ServingMetrics::CountHttpResponse(const std::string& endpoint, int status_code,
                                       const std::string& method) {
  http_responses_total_->Labels({endpoint, std::to_string(status_code), method}).Inc();
}

RequestMetrics& ServingMetrics::Requests(const std::map<std::string, std::string>& customer) {
  std::vector<std::string> values = {options_.model_name};
  for (const std::string& name : options_.allowed_customer_labels) {
    auto it = customer.find(name);
    values.push_back(it == customer.end() ? std::string() : it->second);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = requests_[values];
  if (!slot) slot = std::make_unique<RequestMetrics>(request_families_, values);
  return *slot;
}

SchedulerMetrics& ServingMetrics::Scheduler(int dp_rank) {
  const int key = options_.label_dp_rank ? dp_rank : 0;
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = schedulers_[key];
  if (!slot) {
    std::vector<std::string> values = {options_.model_name, options_.engine_type,
                                       std::to_string(options_.tp_rank),
                                       std::to_string(options_.pp_rank)};
    if (options_.label_dp_rank) values.push_back(std::to_string(dp_rank));
    slot = std::make_unique<SchedulerMetrics>(scheduler_families_, std::move(values));
  }
  return *slot;
}

}  // namespace radixserve::metrics

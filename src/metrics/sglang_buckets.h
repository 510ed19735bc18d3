// SGLang's default histogram bounds (metrics/collector.py, 0.5.x), used when no --bucket-* flag or
// bucket rule overrides them. Bounds only; the histogram appends +Inf.
#pragma once

#include <vector>

namespace radixserve::metrics {

// sglang:time_to_first_token_seconds
const std::vector<double>& DefaultTimeToFirstTokenBuckets();
// sglang:inter_token_latency_seconds
const std::vector<double>& DefaultInterTokenLatencyBuckets();
// sglang:e2e_request_latency_seconds
const std::vector<double>& DefaultE2eRequestLatencyBuckets();
// sglang:prompt_tokens_histogram and sglang:generation_tokens_histogram ('default' rule)
const std::vector<double>& DefaultTokensBuckets();
// sglang:num_retractions
const std::vector<double>& DefaultRetractionsBuckets();
// sglang:queue_time_seconds
const std::vector<double>& DefaultQueueTimeBuckets();
// sglang:per_stage_req_latency_seconds: 30 exponential bounds from 1 ms, factor 1.62.
const std::vector<double>& DefaultPerStageLatencyBuckets();
// sglang:prefetch_pgs and sglang:backup_pgs (pages per storage load / backup)
const std::vector<double>& StoragePagesBuckets();
// sglang:prefetch_bandwidth and sglang:backup_bandwidth (GB/s)
const std::vector<double>& StorageBandwidthBuckets();

}  // namespace radixserve::metrics

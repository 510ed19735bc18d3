#include "engine/expert_recorder.h"

#include <algorithm>
#include <numeric>

#include "common/check.h"
#include "common/log.h"
#include "model/expert_placement.h"

namespace radixserve::engine {

using nlohmann::json;

namespace {

// [layers][experts] rows of a flat counts vector.
json CountsJson(const std::vector<int32_t>& counts, int64_t layers, int64_t experts) {
  json out = json::array();
  for (int64_t l = 0; l < layers; ++l) {
    out.push_back(
        std::vector<int32_t>(counts.begin() + l * experts, counts.begin() + (l + 1) * experts));
  }
  return out;
}

}  // namespace

std::optional<ExpertRecordMode> ParseExpertRecordMode(const std::string& name) {
  if (name == "stat") return ExpertRecordMode::kStat;
  if (name == "per_pass") return ExpertRecordMode::kPerPass;
  if (name == "per_token") return ExpertRecordMode::kPerToken;
  return std::nullopt;
}

ExpertRecorder::ExpertRecorder(ExpertRecorderOptions options) : options_(options) {
  RADIX_CHECK(options_.num_layers > 0 && options_.num_experts > 0 && options_.top_k > 0);
  RADIX_CHECK(options_.num_physical >= options_.num_experts);
  current_.num_experts = options_.num_experts;
  current_.num_physical = options_.num_physical;
  // Every layer starts on the trivial placement (dense layers stay there).
  const model::ExpertPlacement trivial =
      model::ExpertPlacement::Trivial(options_.num_experts, options_.num_physical, 1);
  for (int64_t l = 0; l < options_.num_layers; ++l) {
    last_map_.insert(last_map_.end(), trivial.physical_to_logical().begin(),
                     trivial.physical_to_logical().end());
  }
  current_.top_k = options_.top_k;
  current_.per_token = options_.mode == ExpertRecordMode::kPerToken;
  // The balancedness log reads a recording from launch on (SGLang starts it then).
  if (options_.log_balancedness) recording_ = true;
}

void ExpertRecorder::Reset() {
  RADIX_LOG_INFO("Resetting ExpertDistributionRecorder...");
  ring_.clear();
  next_ = 0;
  records_ = json::array();
  balancedness_.clear();
}

void ExpertRecorder::Start(const std::string& log_prefix) {
  if (recording_) {
    RADIX_LOG_WARN(
        "{}SGLang server is already recording expert ids. Did you forget to dump the expert ids "
        "recorded so far by sending requests to the `/stop_expert_distribution_record` and "
        "`/dump_expert_distribution_record` endpoints?",
        log_prefix);
  }
  Reset();
  recording_ = true;
}

void ExpertRecorder::Stop(const std::string& log_prefix) {
  if (!recording_) {
    RADIX_LOG_WARN(
        "{}SGLang server has not been recording expert ids. Did you forget to start recording by "
        "sending request to the `/start_expert_distribution_record` endpoint?",
        log_prefix);
  }
  recording_ = false;
}

ExpertDump ExpertRecorder::TakeDump(int rank) {
  ExpertDump dump;
  dump.mode = options_.mode;
  const int64_t L = options_.num_layers, E = options_.num_experts;
  if (options_.mode == ExpertRecordMode::kStat) {
    // Oldest first: the slot the next pass would overwrite (0 until the ring wrapped).
    json passes = json::array();
    for (size_t i = 0; i < ring_.size(); ++i) {
      passes.push_back(CountsJson(ring_[(next_ + i) % ring_.size()], L, E));
    }
    dump.document = {{"rank", rank},
                     {"logical_count", std::move(passes)},
                     {"average_utilization_rate_over_window", nullptr}};
  } else {
    dump.document = {
        {"records", std::move(records_)},
        {"last_physical_to_logical_map", CountsJson(last_map_, L, options_.num_physical)}};
  }
  Reset();
  return dump;
}

void ExpertRecorder::Begin(model::ForwardBatch& batch) {
  if (!wants()) return;
  const auto L = static_cast<size_t>(options_.num_layers);
  current_.counts.assign(L * static_cast<size_t>(options_.num_experts), 0);
  current_.physical_counts.assign(L * static_cast<size_t>(options_.num_physical), 0);
  current_.physical_to_logical.assign(L * static_cast<size_t>(options_.num_physical), -1);
  if (current_.per_token) {
    current_.topk_ids.assign(
        static_cast<size_t>(options_.num_layers * batch.num_tokens() * options_.top_k), -1);
  }
  batch.expert_choices = &current_;
}

void ExpertRecorder::End(int64_t forward_pass_id, const model::ForwardBatch& batch, bool decode,
                         const std::string& log_prefix) {
  if (batch.expert_choices != &current_) return;
  const int64_t L = options_.num_layers, P = options_.num_physical, K = options_.top_k;
  for (size_t i = 0; i < last_map_.size(); ++i) {
    if (current_.physical_to_logical[i] >= 0) last_map_[i] = current_.physical_to_logical[i];
  }
  if (options_.log_balancedness) LogBalancedness(forward_pass_id, log_prefix);
  if (!recording_) return;
  if (options_.mode == ExpertRecordMode::kStat) {
    if (options_.buffer_size < 0 || ring_.size() < static_cast<size_t>(options_.buffer_size)) {
      ring_.push_back(current_.counts);
    } else if (!ring_.empty()) {
      ring_[next_] = current_.counts;
      next_ = (next_ + 1) % ring_.size();
    }
    return;
  }
  json record = {{"forward_pass_id", forward_pass_id},
                 {"rank", 0},
                 {"gatherer_key", "primary"},
                 {"global_physical_count", CountsJson(current_.physical_counts, L, P)}};
  if (options_.mode == ExpertRecordMode::kPerToken) {
    const int64_t T = batch.num_tokens();
    json extend = json::array();
    for (const model::SequenceExtend& seq : batch.sequences) extend.push_back(seq.extend_len);
    json topk = json::array();
    for (int64_t l = 0; l < L; ++l) {
      json layer = json::array();
      for (int64_t t = 0; t < T; ++t) {
        const auto at = current_.topk_ids.begin() + (l * T + t) * K;
        layer.push_back(std::vector<int32_t>(at, at + K));
      }
      topk.push_back(std::move(layer));
    }
    record["input_ids"] = batch.token_ids;
    record["positions"] = batch.positions;
    record["extend_seq_lens"] = std::move(extend);
    // SGLang's ForwardMode values: EXTEND 1, DECODE 2.
    record["forward_mode"] = decode ? 2 : 1;
    record["topk_ids_of_layer"] = std::move(topk);
  }
  records_.push_back(std::move(record));
}

void ExpertRecorder::LogBalancedness(int64_t forward_pass_id, const std::string& log_prefix) {
  const int64_t L = options_.num_layers, P = options_.num_physical, blocks = options_.ep_size;
  double sum = 0;
  int64_t total = 0;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<int64_t> load(static_cast<size_t>(blocks), 0);
    for (int64_t s = 0; s < P; ++s) {
      const int32_t n = current_.physical_counts[static_cast<size_t>(l * P + s)];
      load[static_cast<size_t>(s / (P / blocks))] += n;  // slot s's block
      total += n;
    }
    const double mean = static_cast<double>(std::accumulate(load.begin(), load.end(), int64_t{0})) /
                        static_cast<double>(blocks);
    const double max = static_cast<double>(*std::max_element(load.begin(), load.end()));
    sum += (mean + 1e-5) / (max + 1e-5);
  }
  const double current = sum / static_cast<double>(L);
  balancedness_.push_front(current);
  if (balancedness_.size() > 1000) balancedness_.pop_back();
  const auto average = [&](size_t n) {
    const size_t k = std::min(n, balancedness_.size());
    return std::accumulate(balancedness_.begin(), balancedness_.begin() + static_cast<long>(k),
                           0.0) /
           static_cast<double>(k);
  };
  RADIX_LOG_INFO(
      "{}[Expert Balancedness] forward_pass_id={} current_pass_balancedness={:.3f} "
      "last_10_average_balancedness={:.3f} last_100_average_balancedness={:.3f} "
      "last_1000_average_balancedness={:.3f}  gpu_physical_count_sum={}",
      log_prefix, forward_pass_id, current, average(10), average(100), average(1000), total);
}

}  // namespace radixserve::engine

// ExpertRecorder: SGLang's expert-distribution recorder (--expert-distribution-recorder-mode,
// /start_expert_distribution_record, /stop_..., /dump_...) for one engine replica. While
// recording, every forward pass's MoE routing is kept: the number of (token, k) choices of each
// expert in each layer (model::ExpertChoices, filled by the decoder's MoE layers), and in per_token
// mode each token's choices with the step's tokens. Experts are the model's own (SGLang's
// "logical" experts); the physical slots computing them (model/expert_placement.h: the same
// without redundant replicas) give per_pass's global_physical_count and the balancedness.
//
// Modes (SGLang's names): stat keeps the last buffer_size passes' counts in a ring (negative:
// all), dumped as logical_count [passes, layers, experts]; per_pass keeps every pass's counts
// with its forward pass id and physical counts [layers, slots] (the dump's
// last_physical_to_logical_map says which expert each slot held); per_token adds the tokens,
// positions, extend lengths, the step's kind and each token's top-k experts per layer. A dump hands
// the records over and starts afresh; recording goes on. --enable-expert-distribution-metrics logs
// SGLang's balancedness line for every pass (the mean over the expert-parallel blocks' loads
// divided by the largest, a block's load being the choices its slots computed, averaged over
// layers: 1.0 when the blocks carry equal loads, and always with one block).
//
// Thread affinity: the engine thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "model/forward_batch.h"

namespace radixserve::engine {

enum class ExpertRecordMode { kStat, kPerPass, kPerToken };

struct ExpertRecorderOptions {
  ExpertRecordMode mode = ExpertRecordMode::kStat;
  int64_t buffer_size = 1000;  // stat: passes kept; negative: unbounded
  bool log_balancedness = false;
  int64_t num_layers = 0;
  int64_t num_experts = 0;
  int64_t num_physical = 0;  // slots per layer: experts + --ep-num-redundant-experts
  int64_t top_k = 0;
  int64_t ep_size = 1;  // expert-parallel blocks (--ep-size) the balancedness compares
};

// What a dump hands over: the JSON document SGLang's dump file holds (see the class comment),
// for one replica.
struct ExpertDump {
  ExpertRecordMode mode = ExpertRecordMode::kStat;
  nlohmann::json document;
};

class ExpertRecorder {
 public:
  explicit ExpertRecorder(ExpertRecorderOptions options);

  bool recording() const { return recording_; }
  // The recorder wants this pass's choices (recording, or logging balancedness).
  bool wants() const { return recording_ || options_.log_balancedness; }

  // Starting while recording restarts (and stopping while not recording does nothing), each with
  // SGLang's warning.
  void Start(const std::string& log_prefix);
  void Stop(const std::string& log_prefix);
  // Takes the records so far (recording continues from empty).
  ExpertDump TakeDump(int rank);

  // Points batch.expert_choices at a zeroed record for this pass (when wants()).
  void Begin(model::ForwardBatch& batch);
  // Keeps the pass's choices (when recording) and logs balancedness (when asked); `decode`: the
  // step was a decode step (per_token's forward_mode).
  void End(int64_t forward_pass_id, const model::ForwardBatch& batch, bool decode,
           const std::string& log_prefix);

 private:
  void LogBalancedness(int64_t forward_pass_id, const std::string& log_prefix);
  void Reset();

  ExpertRecorderOptions options_;
  bool recording_ = false;
  model::ExpertChoices current_;
  // stat: counts of the last passes (ring of buffer_size, oldest overwritten; next_ is the
  // oldest slot, the one the next pass overwrites: 0 until the ring is full); per_pass /
  // per_token: every pass's record.
  std::vector<std::vector<int32_t>> ring_;
  size_t next_ = 0;
  nlohmann::json records_ = nlohmann::json::array();
  // Each layer's placement as of the last recorded pass ([layers, slots]; trivial until then).
  std::vector<int32_t> last_map_;
  std::deque<double> balancedness_;  // the last 1000 passes'
};

// --expert-distribution-recorder-mode's value; nullopt for an unknown one.
std::optional<ExpertRecordMode> ParseExpertRecordMode(const std::string& name);

}  // namespace radixserve::engine

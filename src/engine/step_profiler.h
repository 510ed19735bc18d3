// StepProfiler: /start_profile and /stop_profile on CPU. SGLang records a torch profiler trace of
// its scheduler steps; radixserve records the steps themselves - when each ran, how long, what it
// was (prefill / decode / mixed), how many sequences and tokens it carried - and hands them over
// as a StepTrace, which the API layer writes as Chrome trace JSON (chrome://tracing, Perfetto).
//
// Recording follows SGLang's ProfileReq: from now, or from the loop's forward count start_step;
// for num_steps steps (per stage with by_stage), or until Stop; only the listed stages when
// `stages` is set. When the recording ends the trace goes to the sink given at Start.
//
// Thread safety: engine thread only (EngineLoop owns one and calls it from its loop and commands).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace radixserve::engine {

struct ProfileOptions {
  std::optional<int64_t> start_step =
      std::nullopt;  // the loop's forward count to start at; none: the next step
  std::optional<int64_t> num_steps = std::nullopt;  // none: until Stop
  bool by_stage = false;                 // num_steps prefill steps and num_steps decode steps
  std::vector<std::string> stages = {};  // "prefill", "decode", "mixed" to keep; empty: all
  bool detailed = false;                 // also each step's KV usage and running batch
};

struct StepRecord {
  int64_t forward_ct = 0;  // the loop's step number
  std::string stage;       // "prefill", "decode" or "mixed"
  int64_t start_us = 0;    // since the trace began
  int64_t duration_us = 0;
  int64_t num_seqs = 0;
  int64_t num_tokens = 0;  // tokens computed (extend tokens + one per decoding sequence)
  int64_t cached_tokens = 0;
  // With ProfileOptions::detailed: after the step.
  std::optional<int64_t> running_reqs;
  std::optional<int64_t> queued_reqs;
  std::optional<double> token_usage;
};

struct StepTrace {
  int32_t dp_rank = 0;
  std::chrono::system_clock::time_point started;  // wall clock at the trace's time 0
  std::vector<StepRecord> steps;
};

using TraceSink = std::function<void(StepTrace)>;

class StepProfiler {
 public:
  using Clock = std::chrono::steady_clock;

  explicit StepProfiler(int32_t dp_rank) : dp_rank_(dp_rank) {}

  // kInvalidArgument when a recording is in progress (SGLang's message).
  Status Start(ProfileOptions options, int64_t forward_ct, TraceSink sink);
  // Ends the recording and delivers its trace; kInvalidArgument when none is in progress.
  Status Stop();

  bool active() const { return sink_ != nullptr; }
  bool detailed() const { return active() && options_.detailed; }
  // Whether step `forward_ct` of `stage` is to be recorded (call before running it).
  bool Wants(int64_t forward_ct, const std::string& stage) const;
  // A step that ran; ends the recording (delivering the trace) once num_steps are in.
  void Record(StepRecord record, Clock::time_point start);

 private:
  void Deliver();

  int32_t dp_rank_;
  ProfileOptions options_;
  TraceSink sink_;
  int64_t first_step_ = 0;
  Clock::time_point origin_;
  StepTrace trace_;
  int64_t recorded_ = 0;
  int64_t prefill_ = 0;
  int64_t decode_ = 0;
};

// --show-time-cost: the cumulative time spent in each named stage of the loop, logged as
// "<stage>: <seconds>s" whenever it grew by more than 0.1 s since its last line (SGLang's
// TimeInfo accounting of its timing marks).
class StageTimeLog {
 public:
  StageTimeLog() = default;
  explicit StageTimeLog(std::string prefix) : prefix_(std::move(prefix)) {}
  void Add(const std::string& stage, StepProfiler::Clock::duration spent);

 private:
  struct Total {
    double seconds = 0;
    double logged = 0;  // `seconds` at the stage's last line
  };
  std::string prefix_;
  std::map<std::string, Total> totals_;
};

}  // namespace radixserve::engine

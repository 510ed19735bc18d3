#include "engine/step_profiler.h"

#include <algorithm>
#include <utility>

#include "common/log.h"

namespace radixserve::engine {

Status StepProfiler::Start(ProfileOptions options, int64_t forward_ct, TraceSink sink) {
  if (active()) {
    return Status(StatusCode::kInvalidArgument,
                  "Profiling is already in progress. Call /stop_profile first.");
  }
  options_ = std::move(options);
  sink_ = std::move(sink);
  first_step_ = options_.start_step ? std::max(*options_.start_step, forward_ct + 1) : 0;
  origin_ = Clock::now();
  trace_ = StepTrace{};
  trace_.dp_rank = dp_rank_;
  trace_.started = std::chrono::system_clock::now();
  recorded_ = prefill_ = decode_ = 0;
  return Status::Ok();
}

Status StepProfiler::Stop() {
  if (!active()) {
    return Status(StatusCode::kInvalidArgument,
                  "Profiling is not in progress. Call /start_profile first.");
  }
  Deliver();
  return Status::Ok();
}

bool StepProfiler::Wants(int64_t forward_ct, const std::string& stage) const {
  if (!active() || forward_ct < first_step_) return false;
  if (!options_.stages.empty() &&
      std::find(options_.stages.begin(), options_.stages.end(), stage) == options_.stages.end()) {
    return false;
  }
  if (options_.by_stage && options_.num_steps) {
    // Mixed steps count as prefill, as SGLang's extend forward mode does.
    return stage == "decode" ? decode_ < *options_.num_steps : prefill_ < *options_.num_steps;
  }
  return true;
}

void StepProfiler::Record(StepRecord record, Clock::time_point start) {
  record.start_us = std::chrono::duration_cast<std::chrono::microseconds>(start - origin_).count();
  if (record.stage == "decode") {
    ++decode_;
  } else {
    ++prefill_;
  }
  ++recorded_;
  trace_.steps.push_back(std::move(record));
  if (!options_.num_steps) return;
  const bool done = options_.by_stage
                        ? prefill_ >= *options_.num_steps && decode_ >= *options_.num_steps
                        : recorded_ >= *options_.num_steps;
  if (done) Deliver();
}

void StepProfiler::Deliver() {
  TraceSink sink = std::move(sink_);
  sink_ = nullptr;
  RADIX_LOG_INFO("Profiling done: {} step(s) recorded.", trace_.steps.size());
  sink(std::move(trace_));
  trace_ = StepTrace{};
}

void StageTimeLog::Add(const std::string& stage, StepProfiler::Clock::duration spent) {
  constexpr double kLogEvery = 0.1;  // seconds of growth between two lines of one stage
  Total& total = totals_[stage];
  total.seconds += std::chrono::duration<double>(spent).count();
  if (total.seconds - total.logged <= kLogEvery) return;
  total.logged = total.seconds;
  RADIX_LOG_INFO("{}{}: {:.3f}s", prefix_, stage, total.seconds);
}

}  // namespace radixserve::engine

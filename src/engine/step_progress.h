// StepProgress: what one engine loop is doing right now, published for its watchdog.
//
// The engine thread calls Begin when an iteration starts working (after it woke up with
// something to do), SetBatch once the step is planned, SetPhase as the step moves on, and End
// when the iteration is over and the loop is about to wait or start the next one. The watchdog
// thread reads it (Snapshot) at any time. An iteration that began and has not ended for longer
// than a timeout is a stuck engine (SGLang's watchdog: a batch in flight and forward_ct not
// advancing).
//
// Thread safety: Begin/SetBatch/SetPhase/End from the engine thread only; Snapshot from any.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace radixserve::engine {

class StepProgress {
 public:
  using Clock = std::chrono::steady_clock;

  struct Snapshot {
    bool busy = false;            // an iteration has begun and not ended
    uint64_t iteration = 0;       // iterations begun so far (identifies the stuck one)
    Clock::time_point started{};  // when the current iteration began (busy only)
    std::string phase;            // "schedule", "forward", "sample", ...
    std::string batch;            // the planned batch, human readable
  };

  void Begin() {
    std::lock_guard<std::mutex> lock(mutex_);
    busy_ = true;
    ++iteration_;
    started_ = Clock::now();
    phase_ = "schedule";
    batch_.clear();
  }
  void SetBatch(std::string batch) {
    std::lock_guard<std::mutex> lock(mutex_);
    batch_ = std::move(batch);
  }
  // `phase` must be a string literal (stored by pointer).
  void SetPhase(const char* phase) {
    std::lock_guard<std::mutex> lock(mutex_);
    phase_ = phase;
  }
  void End() {
    std::lock_guard<std::mutex> lock(mutex_);
    busy_ = false;
  }

  Snapshot Get() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return Snapshot{busy_, iteration_, started_, phase_, batch_};
  }

 private:
  mutable std::mutex mutex_;
  bool busy_ = false;
  uint64_t iteration_ = 0;
  Clock::time_point started_{};
  const char* phase_ = "idle";
  std::string batch_;
};

}  // namespace radixserve::engine

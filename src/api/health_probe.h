// HealthProbe: /health_generate without a thread per call. One probe request (one greedy token)
// is in flight at a time; every call that arrives meanwhile waits for the same answer (200 once
// the engine produces output, 503 if the probe fails or the timeout passes first). One timer
// thread for the server's lifetime enforces the timeout, because a stuck engine is exactly what
// the probe must detect.
//
// Thread safety: Check may be called from any thread and never blocks on the engine; answers are
// sent from the engine thread or the timer thread. The destructor answers waiters 503 and joins
// the timer thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/response_writer.h"
#include "engine/engine.h"

namespace radixserve::api {

class HealthProbe {
 public:
  HealthProbe(engine::Engine* engine, std::chrono::milliseconds timeout);
  ~HealthProbe();
  HealthProbe(const HealthProbe&) = delete;
  HealthProbe& operator=(const HealthProbe&) = delete;

  // Answers `writer` with the outcome of the probe in flight, starting one (with `rid`) if none.
  void Check(ResponseWriterPtr writer, const std::string& rid);

  // Probes started since construction (coalesced calls do not start one).
  uint64_t probes_started() const;

 private:
  void Answer(uint64_t generation, int status);
  void TimerLoop();

  engine::Engine* engine_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ResponseWriterPtr> waiters_;
  bool in_flight_ = false;
  uint64_t generation_ = 0;  // the probe in flight (or the last one)
  std::string rid_;
  std::chrono::steady_clock::time_point deadline_;
  bool stop_ = false;
  std::thread timer_;
};

}  // namespace radixserve::api

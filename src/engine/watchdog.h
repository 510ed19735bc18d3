// Watchdog: SGLang's scheduler watchdog for one engine replica (--watchdog-timeout,
// --soft-watchdog-timeout). A thread looks at the replica's StepProgress every half of the
// smaller timeout; when one engine iteration (schedule + forward + sample) has been running for
// longer than:
//   * the soft timeout: it logs a warning with the stuck batch, the phase the engine thread is
//     in, how long it has been there and the memory state (once per stuck iteration); the server
//     keeps running;
//   * the hard timeout: it logs the same dump as an error with "Watchdog timeout (...)", flushes
//     the log and calls the hard handler, by default std::abort(): SIGABRT, so a crash-dump
//     handler (--crash-dump-folder) runs and the process exits non-zero, as SGLang's watchdog
//     kills its server.
// An engine waiting for work is never stuck.
//
// Thread safety: the constructor starts the thread, the destructor (or Stop) joins it; Stop may
// be called from any thread but one at a time.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/step_progress.h"

namespace radixserve::engine {

struct WatchdogOptions {
  std::optional<double> hard_timeout_s;  // --watchdog-timeout (nullopt: no hard watchdog)
  std::optional<double> soft_timeout_s;  // --soft-watchdog-timeout (nullopt: none)
  std::string name = "Scheduler";        // log prefix, e.g. "DP1 scheduler"
  // Extra state for the dump (memory and queue figures); called on the watchdog thread.
  std::function<std::string()> describe_state;
  // Called after the hard timeout is logged; the default aborts the process. Tests replace it.
  std::function<void()> on_hard_timeout;
};

class Watchdog {
 public:
  // Starts the thread unless neither timeout is set. `progress` must outlive the watchdog.
  Watchdog(WatchdogOptions options, const StepProgress* progress);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void Stop();

  // Soft warnings logged so far (one per stuck iteration).
  int soft_warnings() const;

 private:
  void Run();
  std::string Dump(const StepProgress::Snapshot& snap, double stuck_s) const;

  WatchdogOptions options_;
  const StepProgress* progress_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  int soft_warnings_ = 0;
  std::thread thread_;
};

}  // namespace radixserve::engine

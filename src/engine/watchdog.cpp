#include "engine/watchdog.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "common/log.h"

namespace radixserve::engine {

Watchdog::Watchdog(WatchdogOptions options, const StepProgress* progress)
    : options_(std::move(options)), progress_(progress) {
  if (!options_.on_hard_timeout) options_.on_hard_timeout = [] { std::abort(); };
  if (options_.hard_timeout_s || options_.soft_timeout_s) thread_ = std::thread([this] { Run(); });
}

Watchdog::~Watchdog() { Stop(); }

void Watchdog::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int Watchdog::soft_warnings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return soft_warnings_;
}

std::string Watchdog::Dump(const StepProgress::Snapshot& snap, double stuck_s) const {
  std::string dump = fmt::format("{} iteration {} stuck for {:.2f} s in phase '{}'; batch: {}",
                                 options_.name, snap.iteration, stuck_s, snap.phase,
                                 snap.batch.empty() ? "(not planned yet)" : snap.batch);
  if (options_.describe_state) dump += "; " + options_.describe_state();
  return dump;
}

void Watchdog::Run() {
  // SGLang checks every timeout / 2; a check costs nothing, so never sleep more than a second.
  const double shortest =
      std::min(options_.hard_timeout_s.value_or(1e18), options_.soft_timeout_s.value_or(1e18));
  const auto period = std::chrono::duration<double>(std::clamp(shortest / 2, 0.01, 1.0));
  uint64_t soft_reported = 0;  // the iteration last warned about
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    lock.unlock();
    const StepProgress::Snapshot snap = progress_->Get();
    lock.lock();
    if (!snap.busy) continue;
    const double stuck_s =
        std::chrono::duration<double>(StepProgress::Clock::now() - snap.started).count();
    if (options_.soft_timeout_s && stuck_s > *options_.soft_timeout_s &&
        snap.iteration != soft_reported) {
      soft_reported = snap.iteration;
      ++soft_warnings_;
      RADIX_LOG_WARN("Soft watchdog timeout (soft_watchdog_timeout={}): {}",
                     *options_.soft_timeout_s, Dump(snap, stuck_s));
    }
    if (options_.hard_timeout_s && stuck_s > *options_.hard_timeout_s) {
      RADIX_LOG_ERROR("Watchdog timeout (watchdog_timeout={}): {}. The server is stopped.",
                      *options_.hard_timeout_s, Dump(snap, stuck_s));
      spdlog::default_logger()->flush();
      lock.unlock();
      options_.on_hard_timeout();
      return;
    }
  }
}

}  // namespace radixserve::engine

// LoadProgress: the weight-loading progress display. On a terminal (stderr is a TTY) a tqdm-like
// bar redrawn in place; otherwise a plain log line at every quarter. Used by the loading thread
// only.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace radixserve::model {

class LoadProgress {
 public:
  LoadProgress(std::string label, int64_t total);
  // Records that `done` of `total` items are finished (monotonic; extra calls are cheap).
  void Update(int64_t done);
  // Completes the bar (newline on a terminal).
  void Finish();

 private:
  std::string label_;
  int64_t total_;
  int64_t done_ = 0;
  int last_quarter_ = 0;
  int last_percent_ = -1;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace radixserve::model

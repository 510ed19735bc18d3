#include "model/load_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "common/log.h"

namespace radixserve::model {

LoadProgress::LoadProgress(std::string label, int64_t total)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 1)),
      tty_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

void LoadProgress::Update(int64_t done) {
  done_ = std::min(std::max(done, done_), total_);
  const int percent = static_cast<int>(done_ * 100 / total_);
  if (tty_) {
    if (percent == last_percent_) return;
    last_percent_ = percent;
    constexpr int kWidth = 30;
    const int filled = percent * kWidth / 100;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "\r%s: %3d%%|%s%s| %lld/%lld [%.1fs]", label_.c_str(), percent,
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(),
                 static_cast<long long>(done_), static_cast<long long>(total_), seconds);
    std::fflush(stderr);
    return;
  }
  const int quarter = percent / 25;
  if (quarter > last_quarter_) {
    last_quarter_ = quarter;
    RADIX_LOG_INFO("{}: {}% ({}/{})", label_, quarter * 25, done_, total_);
  }
}

void LoadProgress::Finish() {
  if (finished_) return;
  finished_ = true;
  Update(total_);
  if (tty_) std::fprintf(stderr, "\n");
}

}  // namespace radixserve::model

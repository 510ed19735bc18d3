// Watchdog against a hand-driven StepProgress: a stuck iteration gets one soft warning and then
// the hard handler; an idle or progressing engine gets neither.
#include "engine/watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

namespace radixserve::engine {
namespace {

TEST(WatchdogTest, StuckIterationWarnsOnceThenFiresHard) {
  StepProgress progress;
  std::promise<void> fired;
  WatchdogOptions options;
  options.soft_timeout_s = 0.02;
  options.hard_timeout_s = 0.2;
  std::atomic<int> describe_calls{0};
  options.describe_state = [&] {
    ++describe_calls;
    return std::string("#running-req: 1");
  };
  options.on_hard_timeout = [&] { fired.set_value(); };
  Watchdog watchdog(options, &progress);
  progress.Begin();
  progress.SetBatch("decode batch of 1 sequences");
  progress.SetPhase("forward");
  fired.get_future().wait();               // the hard handler ran: the iteration never ended
  EXPECT_EQ(watchdog.soft_warnings(), 1);  // once per stuck iteration, not once per check
  EXPECT_GE(describe_calls.load(), 2);     // the soft dump and the hard dump
}

TEST(WatchdogTest, IdleOrProgressingEngineNeverFires) {
  StepProgress progress;
  std::atomic<bool> fired{false};
  WatchdogOptions options;
  options.soft_timeout_s = 0.05;
  options.hard_timeout_s = 0.05;
  options.on_hard_timeout = [&] { fired = true; };
  {
    Watchdog watchdog(options, &progress);
    // Short iterations back to back, then idle: no single iteration outlives a timeout.
    for (int i = 0; i < 50; ++i) {
      progress.Begin();
      progress.End();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(watchdog.soft_warnings(), 0);
  }
  EXPECT_FALSE(fired.load());
}

TEST(WatchdogTest, NoTimeoutsNoThread) {
  StepProgress progress;
  Watchdog watchdog(WatchdogOptions{}, &progress);
  progress.Begin();
  watchdog.Stop();
  EXPECT_EQ(watchdog.soft_warnings(), 0);
}

TEST(StepProgressTest, SnapshotFollowsTheIteration) {
  StepProgress progress;
  EXPECT_FALSE(progress.Get().busy);
  progress.Begin();
  progress.SetBatch("extend batch");
  progress.SetPhase("sample");
  StepProgress::Snapshot snap = progress.Get();
  EXPECT_TRUE(snap.busy);
  EXPECT_EQ(snap.iteration, 1u);
  EXPECT_EQ(snap.phase, "sample");
  EXPECT_EQ(snap.batch, "extend batch");
  progress.End();
  progress.Begin();
  snap = progress.Get();
  EXPECT_EQ(snap.iteration, 2u);
  EXPECT_EQ(snap.batch, "");  // a new iteration has no batch until planned
}

}  // namespace
}  // namespace radixserve::engine

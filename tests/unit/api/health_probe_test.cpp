// /health_generate's probe: many callers share one engine request; a stuck engine still gets an
// answer (503) from the single timer thread.
#include "api/health_probe.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace radixserve::api {
namespace {

// An engine that holds submitted sinks until the test releases them.
class HeldEngine final : public engine::Engine {
 public:
  Status Submit(engine::GenerateRequest request, engine::EventSink sink) override {
    std::lock_guard lock(mu_);
    rids_.push_back(request.rid);
    sinks_.push_back(std::move(sink));
    return Status::Ok();
  }
  void Abort(std::string_view rid, engine::AbortMatch) override {
    std::lock_guard lock(mu_);
    aborted_.emplace_back(rid);
  }
  void FlushCacheAsync(std::function<void(Status)> done) override { done(Status::Ok()); }
  void PauseAsync(engine::PauseMode, std::function<void()> done) override { done(); }
  void Continue() override {}
  engine::EngineStats Stats() const override { return {}; }
  Status CheckLeaks() const override { return Status::Ok(); }
  void Shutdown() override {}

  void FinishAll(bool abort) {
    std::vector<engine::EventSink> sinks;
    {
      std::lock_guard lock(mu_);
      sinks.swap(sinks_);
    }
    for (auto& sink : sinks) {
      engine::RequestEvent event;
      event.finished = true;
      if (abort) {
        engine::FinishReason reason;
        reason.kind = engine::FinishKind::kAbort;
        event.finish_reason = reason;
      }
      sink(std::move(event));
    }
  }
  size_t submitted() {
    std::lock_guard lock(mu_);
    return rids_.size();
  }
  std::vector<std::string> aborted() {
    std::lock_guard lock(mu_);
    return aborted_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> rids_;
  std::vector<std::string> aborted_;
  std::vector<engine::EventSink> sinks_;
};

class RecordingWriter final : public ResponseWriter {
 public:
  void Send(int status, std::string, std::string) override {
    std::lock_guard lock(mu_);
    statuses_.push_back(status);
    cv_.notify_all();
  }
  void StartStream() override {}
  void SendEvent(std::string) override {}
  void EndStream() override {}
  void OnDisconnect(std::function<void()>) override {}
  int WaitStatus() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return !statuses_.empty(); });
    return statuses_.front();
  }
  size_t answers() {
    std::lock_guard lock(mu_);
    return statuses_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> statuses_;
};

TEST(HealthProbeTest, ConcurrentCallsShareOneProbe) {
  HeldEngine engine;
  HealthProbe probe(&engine, std::chrono::hours(1));
  std::vector<std::shared_ptr<RecordingWriter>> writers;
  for (int i = 0; i < 50; ++i) {
    writers.push_back(std::make_shared<RecordingWriter>());
    probe.Check(writers.back(), "probe-" + std::to_string(i));
  }
  EXPECT_EQ(engine.submitted(), 1u);
  EXPECT_EQ(probe.probes_started(), 1u);
  engine.FinishAll(/*abort=*/false);
  for (auto& w : writers) EXPECT_EQ(w->WaitStatus(), 200);
  for (auto& w : writers) EXPECT_EQ(w->answers(), 1u);
  // The next call starts a new probe; a failed probe answers 503.
  auto late = std::make_shared<RecordingWriter>();
  probe.Check(late, "probe-late");
  EXPECT_EQ(engine.submitted(), 2u);
  engine.FinishAll(/*abort=*/true);
  EXPECT_EQ(late->WaitStatus(), 503);
}

TEST(HealthProbeTest, StuckEngineTimesOutAndTheProbeIsAborted) {
  HeldEngine engine;
  HealthProbe probe(&engine, std::chrono::milliseconds(1));
  auto writer = std::make_shared<RecordingWriter>();
  probe.Check(writer, "stuck-probe");
  EXPECT_EQ(writer->WaitStatus(), 503);
  ASSERT_EQ(engine.aborted().size(), 1u);
  EXPECT_EQ(engine.aborted()[0], "stuck-probe");
  engine.FinishAll(/*abort=*/true);  // the late event changes nothing
  EXPECT_EQ(writer->answers(), 1u);
}

}  // namespace
}  // namespace radixserve::api

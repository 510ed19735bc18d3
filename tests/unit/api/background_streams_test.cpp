#include "api/background_streams.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace radixserve::api {
namespace {

class Recorder final : public ResponseWriter {
 public:
  void Send(int, std::string, std::string) override { ADD_FAILURE() << "not a stream"; }
  void StartStream() override { started = true; }
  void SendEvent(std::string data) override { events.push_back("|" + data); }
  void SendNamedEvent(std::string name, std::string data) override {
    events.push_back(name + "|" + data);
  }
  void EndStream() override { ended = true; }
  void OnDisconnect(std::function<void()>) override {}

  bool started = false;
  bool ended = false;
  std::vector<std::string> events;
};

TEST(EventLogTest, LateSubscribersGetTheEventsAfterTheirPointThenTheLiveOnes) {
  EventLog log;
  log.Append("a", "0");
  log.Append("b", "1");
  auto from_start = std::make_shared<Recorder>();
  auto after_0 = std::make_shared<Recorder>();
  log.Subscribe(-1, from_start);
  log.Subscribe(0, after_0);
  EXPECT_TRUE(from_start->started && after_0->started);
  EXPECT_EQ(from_start->events, (std::vector<std::string>{"a|0", "b|1"}));
  EXPECT_EQ(after_0->events, (std::vector<std::string>{"b|1"}));
  log.Append("", "2");
  EXPECT_EQ(after_0->events, (std::vector<std::string>{"b|1", "|2"}));
  EXPECT_FALSE(after_0->ended);
  log.Close();
  EXPECT_TRUE(from_start->ended && after_0->ended);
  log.Append("c", "late");  // ignored once closed
  EXPECT_EQ(from_start->events.size(), 3u);

  // After the end: the replay, then the end at once; past the last event: nothing but the end.
  auto after_1 = std::make_shared<Recorder>();
  log.Subscribe(1, after_1);
  EXPECT_EQ(after_1->events, (std::vector<std::string>{"|2"}));
  EXPECT_TRUE(after_1->ended);
  auto beyond = std::make_shared<Recorder>();
  log.Subscribe(99, beyond);
  EXPECT_TRUE(beyond->events.empty());
  EXPECT_TRUE(beyond->ended);
}

TEST(EventLogTest, ConcurrentAppendsAndSubscribesLoseNothing) {
  EventLog log;
  constexpr int kEvents = 2000;
  std::thread producer([&] {
    for (int i = 0; i < kEvents; ++i) log.Append("e", std::to_string(i));
    log.Close();
  });
  std::vector<std::shared_ptr<Recorder>> readers;
  for (int i = 0; i < 50; ++i) {
    readers.push_back(std::make_shared<Recorder>());
    log.Subscribe(-1, readers.back());
  }
  producer.join();
  for (const auto& reader : readers) {
    ASSERT_TRUE(reader->ended);
    ASSERT_EQ(reader->events.size(), static_cast<size_t>(kEvents));
    for (int i = 0; i < kEvents; ++i) ASSERT_EQ(reader->events[i], "e|" + std::to_string(i));
  }
}

TEST(BackgroundStreamsTest, FinishedStreamsAreEvictedOldestFirstUnfinishedNever) {
  BackgroundStreams streams(/*max_streams=*/2, /*max_bytes=*/1 << 20);
  auto a = streams.Create("a");
  auto b = streams.Create("b");
  auto c = streams.Create("c");  // over the count, but nothing has finished
  EXPECT_EQ(streams.size(), 3u);
  b->Close();
  a->Close();
  streams.Create("d");  // the oldest finished ones go until the bound holds
  EXPECT_EQ(streams.Find("a"), nullptr);
  EXPECT_EQ(streams.Find("b"), nullptr);
  EXPECT_EQ(streams.Find("c"), c);
  EXPECT_NE(streams.Find("d"), nullptr);
  EXPECT_EQ(streams.size(), 2u);
}

TEST(BackgroundStreamsTest, TheByteBoundEvictsFinishedStreams) {
  BackgroundStreams streams(/*max_streams=*/100, /*max_bytes=*/100);
  auto big = streams.Create("big");
  big->Append("x", std::string(200, 'y'));
  big->Close();
  streams.Create("next");
  EXPECT_EQ(streams.Find("big"), nullptr);
  EXPECT_NE(streams.Find("next"), nullptr);
}

}  // namespace
}  // namespace radixserve::api

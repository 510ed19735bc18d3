// Responder over a real loopback connection: SSE streams driven from another thread, disconnect
// detection, backpressure on slow readers.
#include "http/responder.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "test_client.h"
#include "test_server.h"

namespace radixserve::http {
namespace {

using testing::MakeRequest;
using testing::TestConnection;
using testing::TestServer;

TEST(ResponderTest, StreamEventsFromAnotherThread) {
  TestServer ts;
  TestConnection c(ts.port());
  ASSERT_TRUE(c.Send(MakeRequest("POST", "/stream", "{}")));
  ASSERT_TRUE(ts.streams.WaitResponders(1));

  std::string expected;
  for (int i = 0; i < 100; ++i) expected += "data: {\"i\":" + std::to_string(i) + "}\n\n";
  expected += "data: [DONE]\n\n";
  std::thread engine([r = ts.streams.at(0)] {
    r->StartStream();
    for (int i = 0; i < 100; ++i) r->SendEvent("{\"i\":" + std::to_string(i) + "}");
    r->SendEvent("[DONE]");
    r->EndStream();
    r->SendEvent("ignored after the end");
  });

  auto head = c.ReadHead();
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->header("content-type"), "text/event-stream; charset=utf-8");
  EXPECT_EQ(head->header("transfer-encoding"), "chunked");
  std::string body;
  while (true) {
    auto chunk = c.ReadChunk();
    ASSERT_TRUE(chunk);
    if (chunk->empty()) break;
    body += *chunk;
  }
  engine.join();
  EXPECT_EQ(body, expected);
  ts.streams.Clear();
  EXPECT_EQ(ts.streams.disconnects(), 0);

  // The connection is reusable after the stream.
  ASSERT_TRUE(c.Send(MakeRequest("GET", "/hello")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello");
}

TEST(ResponderTest, DeferredCompleteResponse) {
  TestServer ts;
  TestConnection c(ts.port());
  ASSERT_TRUE(c.Send(MakeRequest("POST", "/stream", "{}")));
  ASSERT_TRUE(ts.streams.WaitResponders(1));
  std::thread engine(
      [r = ts.streams.at(0)] { r->Send(503, "application/json", R"({"later":true})"); });
  engine.join();
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, R"({"later":true})");
}

TEST(ResponderTest, DisconnectMidStreamIsReported) {
  TestServer ts;
  TestConnection c(ts.port());
  ASSERT_TRUE(c.Send(MakeRequest("POST", "/stream", "{}")));
  ASSERT_TRUE(ts.streams.WaitResponders(1));
  ResponderPtr responder = ts.streams.at(0);
  responder->StartStream();
  responder->SendEvent("first");
  ASSERT_TRUE(c.ReadHead());
  auto chunk = c.ReadChunk();
  ASSERT_TRUE(chunk);
  EXPECT_EQ(*chunk, "data: first\n\n");

  c.Close();
  ASSERT_TRUE(ts.streams.WaitDisconnects(1));
  EXPECT_TRUE(responder->disconnected());
  responder->SendEvent("nobody listens");  // ignored, no crash
  responder->EndStream();
  // A callback registered after the fact runs at once.
  bool late = false;
  responder->OnDisconnect([&] { late = true; });
  EXPECT_TRUE(late);
  EXPECT_EQ(ts.streams.disconnects(), 1);
}

TEST(ResponderTest, DisconnectWhileQueuedIsReported) {
  TestServer ts;
  TestConnection c(ts.port());
  ASSERT_TRUE(c.Send(MakeRequest("POST", "/stream", "{}")));
  ASSERT_TRUE(ts.streams.WaitResponders(1));
  c.Close();  // before any response byte: a request still waiting in the engine's queue
  ASSERT_TRUE(ts.streams.WaitDisconnects(1));
  EXPECT_TRUE(ts.streams.at(0)->disconnected());
}

TEST(ResponderTest, SlowReaderIsDropped) {
  ServerOptions options;
  options.max_pending_write_bytes = 64 * 1024;
  TestServer ts(options);
  TestConnection c(ts.port(), /*receive_buffer=*/4096);
  ASSERT_TRUE(c.Send(MakeRequest("POST", "/stream", "{}")));
  ASSERT_TRUE(ts.streams.WaitResponders(1));
  ResponderPtr responder = ts.streams.at(0);
  responder->StartStream();
  // The client never reads. Kernel buffers absorb a few MB at most; 64 MB must overflow the
  // 64 KiB queue long before the loop ends.
  std::string event(1024, 'x');
  for (int i = 0; i < 64 * 1024 && !responder->disconnected(); ++i) responder->SendEvent(event);
  ASSERT_TRUE(ts.streams.WaitDisconnects(1));
  EXPECT_TRUE(responder->disconnected());
  EXPECT_TRUE(c.WaitClosed());
}

}  // namespace
}  // namespace radixserve::http

#include "http/http_server.h"

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "test_client.h"
#include "test_server.h"

namespace radixserve::http {
namespace {

using testing::MakeRequest;
using testing::TestConnection;
using testing::TestServer;

nlohmann::json ErrorJson(int code, const std::string& message, const std::string& type) {
  return {{"object", "error"},
          {"message", message},
          {"type", type},
          {"param", nullptr},
          {"code", code}};
}

TEST(HttpServerTest, RoutesRequests) {
  TestServer ts;
  TestConnection c(ts.port());
  ASSERT_TRUE(c.ok());

  ASSERT_TRUE(c.Send(MakeRequest("GET", "/hello")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello");
  EXPECT_EQ(r->header("content-length"), "5");
  EXPECT_EQ(r->header("content-type"), "text/plain; charset=utf-8");

  ASSERT_TRUE(c.Send(MakeRequest("GET", "/v1/models/org%2Fmodel-1")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "org/model-1");

  ASSERT_TRUE(c.Send(MakeRequest("GET", "/")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->header("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(r->body, "<html>ui</html>");

  // HEAD: same headers, no body bytes (the next response must parse cleanly).
  ASSERT_TRUE(c.Send(MakeRequest("HEAD", "/hello")));
  r = c.ReadResponse(/*head_request=*/true);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->header("content-length"), "5");
  ASSERT_TRUE(c.Send(MakeRequest("GET", "/query?q=a+b%26c")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "a b&c");

  ASSERT_TRUE(c.Send(MakeRequest("PUT", "/echo", R"({"x":1})")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, R"({"x":1})");
  EXPECT_EQ(r->header("content-type"), "application/json");
}

TEST(HttpServerTest, ExpectContinue) {
  TestServer ts;
  TestConnection c(ts.port());
  ASSERT_TRUE(
      c.Send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
             "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  auto interim = c.ReadHead();
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(c.Send("abcde"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "abcde");
}

TEST(HttpServerTest, NotFoundAndMethodNotAllowedBodies) {
  TestServer ts;
  TestConnection c(ts.port());
  ASSERT_TRUE(c.Send(MakeRequest("GET", "/no/such/route")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->header("content-type"), "application/json");
  EXPECT_EQ(nlohmann::json::parse(r->body), ErrorJson(404, "Not Found", "NotFoundError"));

  ASSERT_TRUE(c.Send(MakeRequest("DELETE", "/echo")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->header("allow"), "POST, PUT");
  EXPECT_EQ(nlohmann::json::parse(r->body),
            ErrorJson(405, "Method Not Allowed", "MethodNotAllowedError"));

  // The connection survives both.
  ASSERT_TRUE(c.Send(MakeRequest("GET", "/hello")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(HttpServerTest, HandlerFailuresBecome500) {
  TestServer ts;
  TestConnection c(ts.port());
  ASSERT_TRUE(c.Send(MakeRequest("GET", "/throw")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(nlohmann::json::parse(r->body),
            ErrorJson(500, "Internal server error: boom", "InternalServerError"));
  ASSERT_TRUE(c.Send(MakeRequest("GET", "/silent")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(nlohmann::json::parse(r->body)["type"], "InternalServerError");
}

TEST(HttpServerTest, BodyLimit) {
  {
    TestServer ts;  // default limit: 32 MiB
    TestConnection c(ts.port());
    std::string big(1 << 20, 'x');
    ASSERT_TRUE(c.Send(MakeRequest("POST", "/echo", big)));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body.size(), big.size());
    // Declared length over 32 MiB: rejected from the header, the body is never read.
    ASSERT_TRUE(
        c.Send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               "Content-Length: 33554433\r\n\r\n"));
    r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
    EXPECT_EQ(r->header("connection"), "close");
    EXPECT_EQ(nlohmann::json::parse(r->body),
              ErrorJson(413, "Request body is larger than the limit of 33554432 bytes.",
                        "RequestEntityTooLarge"));
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    ServerOptions options;
    options.max_body_bytes = 1024;
    TestServer ts(options);
    TestConnection c(ts.port());
    ASSERT_TRUE(c.Send(MakeRequest("POST", "/echo", std::string(1024, 'a'))));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    // Chunked upload over the limit is caught while reading the body.
    ASSERT_TRUE(
        c.Send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
               "400\r\n" +
               std::string(1024, 'b') + "\r\n1\r\nc\r\n0\r\n\r\n"));
    r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
  }
}

TEST(HttpServerTest, BodyBudgetIsSharedByAllConnections) {
  ServerOptions options;
  options.max_body_bytes = 400'000;
  options.max_buffered_body_bytes = 600'000;
  TestServer ts(options);
  // One upload declares 400 kB and sends half: its whole declared length is held. The server
  // answers 100 Continue only once the reservation is made, so the second connection below
  // cannot overtake it however the I/O threads are scheduled.
  TestConnection slow(ts.port());
  ASSERT_TRUE(
      slow.Send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 400000\r\n"
                "Expect: 100-continue\r\n\r\n"));
  auto interim = slow.ReadHead();
  ASSERT_TRUE(interim);
  ASSERT_EQ(interim->status, 100);
  ASSERT_TRUE(slow.Send(std::string(200'000, 'a')));
  // A second one that would bring the total past 600 kB is refused before its body is read.
  TestConnection second(ts.port());
  ASSERT_TRUE(
      second.Send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 300000\r\n\r\n"));
  auto r = second.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(nlohmann::json::parse(r->body)["type"], "ServiceUnavailable");
  EXPECT_TRUE(second.WaitClosed());
  // Small requests (up to 64 KiB) are not counted: they still go through, even past the budget.
  TestConnection small(ts.port());
  ASSERT_TRUE(small.Send(MakeRequest("POST", "/echo", std::string(60'000, 'b'))));
  r = small.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // Once the slow upload completes, its reservation is returned: the 300 kB body fits now.
  ASSERT_TRUE(slow.Send(std::string(200'000, 'a')));
  r = slow.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body.size(), 400'000u);
  TestConnection third(ts.port());
  ASSERT_TRUE(third.Send(MakeRequest("POST", "/echo", std::string(300'000, 'c'))));
  r = third.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(HttpServerTest, ClosedUploadGivesItsBodyBudgetBack) {
  ServerOptions options;
  options.max_body_bytes = 100'000;
  options.max_buffered_body_bytes = 100'000;
  TestServer ts(options);
  {
    TestConnection gone(ts.port());
    ASSERT_TRUE(
        gone.Send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\nxx"));
    // Round trip on another connection so the server has read the head before `gone` closes.
    TestConnection probe(ts.port());
    ASSERT_TRUE(probe.Send(MakeRequest("GET", "/hello")));
    ASSERT_TRUE(probe.ReadResponse());
  }
  // The server notices the close asynchronously; a full-size body fits once it has.
  int status = 0;
  for (int attempt = 0; attempt < 200 && status != 200; ++attempt) {
    TestConnection c(ts.port());
    ASSERT_TRUE(c.Send(MakeRequest("POST", "/echo", std::string(100'000, 'd'))));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    status = r->status;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status, 200);
}

TEST(HttpServerTest, MalformedRequestIs400) {
  TestServer ts;
  TestConnection c(ts.port());
  ASSERT_TRUE(c.Send("GARBAGE\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(nlohmann::json::parse(r->body)["type"], "BadRequestError");
  EXPECT_TRUE(c.WaitClosed());
}

TEST(HttpServerTest, ApiKeyAndCors) {
  ServerOptions options;
  options.api_key = "sk-test";
  TestServer ts(options);
  TestConnection c(ts.port());

  ASSERT_TRUE(c.Send(MakeRequest("GET", "/hello")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(nlohmann::json::parse(r->body), (nlohmann::json{{"error", "Unauthorized"}}));

  ASSERT_TRUE(c.Send(MakeRequest("GET", "/hello", "", "Authorization: Bearer sk-tesT\r\n")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);

  // Unknown routes are behind the key too (the middleware runs before routing).
  ASSERT_TRUE(c.Send(MakeRequest("GET", "/nothing")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);

  ASSERT_TRUE(c.Send(MakeRequest(
      "GET", "/hello", "", "Authorization: Bearer sk-test\r\nOrigin: http://ui.example\r\n")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // Any origin may read, but never with credentials (docs/security.md: unlike SGLang).
  EXPECT_EQ(r->header("access-control-allow-origin"), "*");
  EXPECT_EQ(r->header("access-control-allow-credentials"), "");

  for (const char* path : {"/health", "/metrics"}) {
    ASSERT_TRUE(c.Send(MakeRequest("GET", path)));
    r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << path;
  }

  ASSERT_TRUE(c.Send(MakeRequest("OPTIONS", "/v1/chat/completions", "",
                                 "Origin: http://ui.example\r\n"
                                 "Access-Control-Request-Method: POST\r\n"
                                 "Access-Control-Request-Headers: authorization\r\n")));
  r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "OK");
  EXPECT_EQ(r->header("access-control-allow-origin"), "*");
  EXPECT_EQ(r->header("access-control-allow-headers"), "authorization");
}

TEST(HttpServerTest, KeepAliveAndPipelining) {
  TestServer ts;
  TestConnection c(ts.port());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(c.Send(MakeRequest("GET", "/query?q=" + std::to_string(i))));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, std::to_string(i));
    EXPECT_EQ(r->header("connection"), "");  // HTTP/1.1 keep-alive is implicit
  }
  // Three requests in one write: answered in order, one at a time.
  ASSERT_TRUE(c.Send(MakeRequest("GET", "/hello") + MakeRequest("POST", "/echo", "[1,2]") +
                     MakeRequest("GET", "/query?q=last")));
  for (const char* expected : {"hello", "[1,2]", "last"}) {
    auto r = c.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, expected);
  }
  ASSERT_TRUE(c.Send(MakeRequest("GET", "/hello", "", "Connection: close\r\n")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(c.WaitClosed());
}

TEST(HttpServerTest, IdleKeepAliveConnectionIsClosed) {
  ServerOptions options;
  options.keep_alive_timeout = std::chrono::milliseconds(50);
  TestServer ts(options);
  TestConnection c(ts.port());
  ASSERT_TRUE(c.Send(MakeRequest("GET", "/hello")));
  ASSERT_TRUE(c.ReadResponse());
  EXPECT_TRUE(c.WaitClosed());
}

int CountThreads() {
  int n = 0;
  namespace fs = std::filesystem;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/task")) ++n;
  return n;
}

long RssKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// 2,000 concurrent connections (1,000 idle keep-alive, 1,000 open SSE streams) on 2 I/O threads.
TEST(HttpServerTest, HoldsTwoThousandConnectionsOnTwoThreads) {
  constexpr int kIdle = 1000;
  constexpr int kStreams = 1000;
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur < 8192) {
    limit.rlim_cur = std::min<rlim_t>(8192, limit.rlim_max);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
  }
  if (limit.rlim_cur < 2 * (kIdle + kStreams) + 64) GTEST_SKIP() << "RLIMIT_NOFILE too low";

  ServerOptions options;
  options.io_threads = 2;
  options.keep_alive_timeout = std::chrono::minutes(10);
  int threads_before = CountThreads();
  long rss_before = RssKiB();
  TestServer ts(options);
  EXPECT_EQ(CountThreads() - threads_before, 2);

  std::vector<std::unique_ptr<TestConnection>> idle;
  for (int i = 0; i < kIdle; ++i) {
    idle.push_back(std::make_unique<TestConnection>(ts.port()));
    ASSERT_TRUE(idle.back()->Send(MakeRequest("GET", "/hello")));
    auto r = idle.back()->ReadResponse();
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
  }
  std::vector<std::unique_ptr<TestConnection>> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(std::make_unique<TestConnection>(ts.port()));
    ASSERT_TRUE(streams.back()->Send(MakeRequest("POST", "/stream", "{}")));
  }
  ASSERT_TRUE(ts.streams.WaitResponders(kStreams));
  std::thread engine([&] {
    for (int i = 0; i < kStreams; ++i) {
      ts.streams.at(i)->StartStream();
      ts.streams.at(i)->SendEvent("{\"stream\":" + std::to_string(i) + "}");
    }
  });
  engine.join();
  // Responders register in the order the I/O threads handled the requests, so each client gets
  // some event: together they must be exactly the 1,000 sent.
  std::vector<int> seen(kStreams, 0);
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(streams[i]->ReadHead());
    auto chunk = streams[i]->ReadChunk();
    ASSERT_TRUE(chunk);
    ASSERT_TRUE(chunk->starts_with("data: ") && chunk->ends_with("\n\n")) << *chunk;
    int k = nlohmann::json::parse(chunk->substr(6))["stream"].get<int>();
    ASSERT_TRUE(k >= 0 && k < kStreams);
    ++seen[k];
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), kStreams);

  EXPECT_EQ(ts.server->open_connections(), static_cast<std::size_t>(kIdle + kStreams));
  int server_threads = CountThreads() - threads_before;
  long rss_delta = RssKiB() - rss_before;
  std::cout << "[ measured ] " << kIdle + kStreams
            << " open connections: server I/O threads=" << server_threads
            << ", process RSS growth=" << rss_delta / 1024
            << " MiB (includes the test's own 2000 client sockets)\n";
  ::testing::Test::RecordProperty("server_threads", server_threads);
  ::testing::Test::RecordProperty("rss_growth_kib", static_cast<int>(rss_delta));
  EXPECT_EQ(server_threads, 2);

  // Everything still works: finish the streams, reuse the idle connections.
  for (int i = 0; i < kStreams; ++i) ts.streams.at(i)->EndStream();
  for (int i = 0; i < kStreams; ++i) {
    auto last = streams[i]->ReadChunk();
    ASSERT_TRUE(last);
    ASSERT_TRUE(last->empty());
  }
  for (int i = 0; i < kIdle; i += 97) {
    ASSERT_TRUE(idle[i]->Send(MakeRequest("GET", "/query?q=" + std::to_string(i))));
    auto r = idle[i]->ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, std::to_string(i));
  }
  EXPECT_EQ(ts.streams.disconnects(), 0);
}

// Shutdown with open streams: idle connections close at once, a stream that ends within the
// grace period completes, the rest are force-closed and report a disconnect.
TEST(HttpServerTest, GracefulShutdownWithOpenStreams) {
  ServerOptions options;
  options.shutdown_grace = std::chrono::milliseconds(3000);
  options.keep_alive_timeout = std::chrono::minutes(10);
  TestServer ts(options);
  TestConnection idle(ts.port());
  ASSERT_TRUE(idle.Send(MakeRequest("GET", "/hello")));
  ASSERT_TRUE(idle.ReadResponse());

  std::vector<std::unique_ptr<TestConnection>> streams;
  for (int i = 0; i < 3; ++i) {
    streams.push_back(std::make_unique<TestConnection>(ts.port()));
    ASSERT_TRUE(streams.back()->Send(MakeRequest("POST", "/stream", "{}")));
    ASSERT_TRUE(ts.streams.WaitResponders(i + 1));
    ts.streams.at(i)->StartStream();
    ts.streams.at(i)->SendEvent("hi");
    ASSERT_TRUE(streams.back()->ReadHead());
    ASSERT_TRUE(streams.back()->ReadChunk());
  }

  ts.server->BeginShutdown();
  EXPECT_TRUE(idle.WaitClosed());

  // Stream 0 finishes inside the grace period: its client sees a complete stream, then EOF.
  ts.streams.at(0)->SendEvent("bye");
  ts.streams.at(0)->EndStream();
  auto chunk = streams[0]->ReadChunk();
  ASSERT_TRUE(chunk);
  EXPECT_EQ(*chunk, "data: bye\n\n");
  chunk = streams[0]->ReadChunk();
  ASSERT_TRUE(chunk);
  EXPECT_TRUE(chunk->empty());
  EXPECT_TRUE(streams[0]->WaitClosed());

  // Streams 1 and 2 never end: force-closed after the grace period.
  EXPECT_TRUE(streams[1]->WaitClosed());
  EXPECT_TRUE(streams[2]->WaitClosed());
  ts.server->Wait();
  EXPECT_EQ(ts.streams.disconnects(), 2);
  EXPECT_FALSE(ts.streams.at(0)->disconnected());
  EXPECT_TRUE(ts.streams.at(1)->disconnected());
  EXPECT_EQ(ts.server->open_connections(), 0u);

  // No longer accepting.
  TestConnection late(ts.port());
  EXPECT_FALSE(late.ok() && late.Send(MakeRequest("GET", "/hello")) && late.ReadResponse());
}

TEST(HttpServerTest, SigtermShutsDown) {
  TestServer ts;
  TestConnection idle(ts.port());
  ASSERT_TRUE(idle.Send(MakeRequest("GET", "/hello")));
  ASSERT_TRUE(idle.ReadResponse());
  ts.server->HandleSignals();
  ASSERT_EQ(::raise(SIGTERM), 0);
  ts.server->Wait();  // returns because the signal started the shutdown
  EXPECT_TRUE(idle.WaitClosed());
  EXPECT_EQ(ts.server->open_connections(), 0u);
}

TEST(HttpServerTest, StartReportsBindErrors) {
  TestServer first;
  ServerOptions options;
  options.port = first.port();
  HttpServer second(options, Router());
  Status status = second.Start();
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("cannot listen on 127.0.0.1:"), std::string::npos);

  options.host = "not-an-address";
  HttpServer third(options, Router());
  EXPECT_FALSE(third.Start().ok());
}

}  // namespace
}  // namespace radixserve::http

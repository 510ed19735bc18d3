// ServerOptions::on_response sees one record per response with SGLang's labels: the matched
// route ("Unknown" without one), the status, the method; a stream counts once with 200.
#include <gtest/gtest.h>

#include <mutex>
#include <tuple>
#include <vector>

#include "test_client.h"
#include "test_server.h"

namespace radixserve::http {
namespace {

using testing::MakeRequest;
using testing::TestConnection;
using testing::TestServer;

struct Seen {
  std::mutex mu;
  std::vector<std::tuple<std::string, std::string, int>> records;
  size_t size() {
    std::lock_guard lock(mu);
    return records.size();
  }
};

TEST(ResponseObserverTest, ReportsRouteStatusAndMethod) {
  Seen seen;
  ServerOptions options;
  options.on_response = [&seen](const ResponseInfo& r) {
    std::lock_guard lock(seen.mu);
    seen.records.emplace_back(std::string(r.endpoint), std::string(r.method), r.status);
  };
  TestServer ts(options);
  TestConnection c(ts.port());
  for (const char* target : {"/hello", "/v1/models/x", "/missing", "/throw"}) {
    ASSERT_TRUE(c.Send(MakeRequest("GET", target)));
    ASSERT_TRUE(c.ReadResponse());
  }
  ASSERT_TRUE(c.Send(MakeRequest("DELETE", "/hello")));
  ASSERT_TRUE(c.ReadResponse());
  ASSERT_TRUE(c.Send(MakeRequest("POST", "/stream", "{}")));
  ASSERT_TRUE(ts.streams.WaitResponders(1));
  ts.streams.at(0)->StartStream();
  ts.streams.at(0)->SendEvent("x");
  ts.streams.at(0)->EndStream();
  ts.streams.Clear();
  ts.server->Shutdown();
  std::lock_guard lock(seen.mu);
  using R = std::tuple<std::string, std::string, int>;
  EXPECT_EQ(seen.records, (std::vector<R>{{"/hello", "GET", 200},
                                          {"/v1/models/{path}", "GET", 200},
                                          {"Unknown", "GET", 404},
                                          {"/throw", "GET", 500},
                                          {"Unknown", "DELETE", 405},
                                          {"/stream", "POST", 200}}));
}

}  // namespace
}  // namespace radixserve::http

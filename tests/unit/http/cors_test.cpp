#include "http/cors.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace radixserve::http {
namespace {

std::string Find(const HeaderList& headers, const std::string& name) {
  auto it = std::find_if(headers.begin(), headers.end(),
                         [&](const auto& h) { return h.first == name; });
  return it == headers.end() ? std::string("<absent>") : it->second;
}

TEST(CorsTest, Preflight) {
  Request r;
  r.method = "OPTIONS";
  r.path = "/v1/chat/completions";
  r.headers = {{"origin", "http://ui.example"},
               {"access-control-request-method", "POST"},
               {"access-control-request-headers", "authorization, content-type"}};
  ASSERT_TRUE(IsCorsPreflight(r));
  PreflightAnswer a = AnswerCorsPreflight(r);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body, "OK");
  EXPECT_EQ(Find(a.headers, "Access-Control-Allow-Origin"), "http://ui.example");
  EXPECT_EQ(Find(a.headers, "Access-Control-Allow-Headers"), "authorization, content-type");
  EXPECT_EQ(Find(a.headers, "Access-Control-Allow-Methods"),
            "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT");
  EXPECT_EQ(Find(a.headers, "Access-Control-Allow-Credentials"), "true");
  EXPECT_EQ(Find(a.headers, "Access-Control-Max-Age"), "600");

  r.headers[1].second = "TRACE";
  EXPECT_EQ(AnswerCorsPreflight(r).status, 400);

  r.headers.erase(r.headers.begin() + 1);  // no Access-Control-Request-Method: not a preflight
  EXPECT_FALSE(IsCorsPreflight(r));
}

TEST(CorsTest, SimpleRequests) {
  Request r;
  r.method = "GET";
  EXPECT_TRUE(CorsResponseHeaders(r).empty());
  r.headers = {{"origin", "http://ui.example"}};
  HeaderList h = CorsResponseHeaders(r);
  EXPECT_EQ(Find(h, "Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(Find(h, "Access-Control-Allow-Credentials"), "true");
  r.headers.emplace_back("cookie", "a=b");
  h = CorsResponseHeaders(r);
  EXPECT_EQ(Find(h, "Access-Control-Allow-Origin"), "http://ui.example");
  EXPECT_EQ(Find(h, "Vary"), "Origin");
}

}  // namespace
}  // namespace radixserve::http

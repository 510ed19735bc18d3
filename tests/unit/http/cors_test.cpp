#include "http/cors.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace radixserve::http {
namespace {

std::string Find(const HeaderList& headers, const std::string& name) {
  auto it =
      std::find_if(headers.begin(), headers.end(), [&](const auto& h) { return h.first == name; });
  return it == headers.end() ? std::string("<absent>") : it->second;
}

Request Preflight(const std::string& origin, const std::string& method) {
  Request r;
  r.method = "OPTIONS";
  r.path = "/v1/chat/completions";
  r.headers = {{"origin", origin},
               {"access-control-request-method", method},
               {"access-control-request-headers", "authorization, content-type"}};
  return r;
}

TEST(CorsTest, AnyOriginByDefaultButNeverWithCredentials) {
  CorsPolicy policy;
  Request r = Preflight("http://ui.example", "POST");
  ASSERT_TRUE(IsCorsPreflight(r));
  PreflightAnswer a = policy.AnswerPreflight(r);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body, "OK");
  EXPECT_EQ(Find(a.headers, "Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(Find(a.headers, "Access-Control-Allow-Credentials"), "<absent>");
  EXPECT_EQ(Find(a.headers, "Access-Control-Allow-Headers"), "authorization, content-type");
  EXPECT_EQ(Find(a.headers, "Access-Control-Allow-Methods"),
            "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT");
  EXPECT_EQ(Find(a.headers, "Access-Control-Max-Age"), "600");
  EXPECT_EQ(policy.AnswerPreflight(Preflight("http://ui.example", "TRACE")).status, 400);

  r.headers.erase(r.headers.begin() + 1);  // no Access-Control-Request-Method: not a preflight
  EXPECT_FALSE(IsCorsPreflight(r));

  Request get;
  get.method = "GET";
  EXPECT_TRUE(policy.ResponseHeaders(get).empty());
  get.headers = {{"origin", "http://evil.example"}, {"cookie", "session=1"}};
  HeaderList h = policy.ResponseHeaders(get);
  // A cookie must not turn "*" into an echoed origin with credentials.
  EXPECT_EQ(Find(h, "Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(Find(h, "Access-Control-Allow-Credentials"), "<absent>");
}

TEST(CorsTest, ListedOriginsOnly) {
  CorsPolicy policy({"https://good.example/"});
  PreflightAnswer good = policy.AnswerPreflight(Preflight("https://good.example", "POST"));
  EXPECT_EQ(good.status, 200);
  EXPECT_EQ(Find(good.headers, "Access-Control-Allow-Origin"), "https://good.example");
  EXPECT_EQ(Find(good.headers, "Access-Control-Allow-Credentials"), "true");
  EXPECT_EQ(Find(good.headers, "Vary"), "Origin");

  PreflightAnswer evil = policy.AnswerPreflight(Preflight("https://evil.example", "POST"));
  EXPECT_EQ(evil.status, 400);
  EXPECT_EQ(Find(evil.headers, "Access-Control-Allow-Origin"), "<absent>");

  Request get;
  get.method = "GET";
  get.headers = {{"origin", "https://evil.example"}};
  EXPECT_TRUE(policy.ResponseHeaders(get).empty());
  get.headers = {{"origin", "https://good.example"}};
  EXPECT_EQ(Find(policy.ResponseHeaders(get), "Access-Control-Allow-Origin"),
            "https://good.example");
}

}  // namespace
}  // namespace radixserve::http

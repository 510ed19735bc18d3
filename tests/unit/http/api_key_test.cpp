#include "http/api_key.h"

#include <gtest/gtest.h>

namespace radixserve::http {
namespace {

Request Make(std::string method, std::string path, std::string auth = "") {
  Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  if (!auth.empty()) r.headers.emplace_back("authorization", std::move(auth));
  return r;
}

TEST(ApiKeyTest, NoKeyAllowsAll) {
  ApiKeyCheck check("");
  EXPECT_FALSE(check.enabled());
  EXPECT_TRUE(check.Allows(Make("POST", "/generate")));
}

TEST(ApiKeyTest, BearerRequiredExceptExemptPaths) {
  ApiKeyCheck check("sk-secret");
  EXPECT_FALSE(check.Allows(Make("POST", "/generate")));
  EXPECT_FALSE(check.Allows(Make("POST", "/generate", "Bearer sk-secreT")));
  EXPECT_FALSE(check.Allows(Make("POST", "/generate", "Bearer sk-secret ")));
  EXPECT_FALSE(check.Allows(Make("POST", "/generate", "bearer sk-secret")));  // exact, like SGLang
  EXPECT_FALSE(check.Allows(Make("POST", "/generate", "sk-secret")));
  EXPECT_TRUE(check.Allows(Make("POST", "/generate", "Bearer sk-secret")));
  // SGLang exempts OPTIONS and any path starting with /health or /metrics, nothing else.
  EXPECT_TRUE(check.Allows(Make("GET", "/health")));
  EXPECT_TRUE(check.Allows(Make("GET", "/health_generate")));
  EXPECT_TRUE(check.Allows(Make("GET", "/metrics")));
  EXPECT_TRUE(check.Allows(Make("OPTIONS", "/v1/models")));
  EXPECT_FALSE(check.Allows(Make("GET", "/ping")));
  EXPECT_FALSE(check.Allows(Make("GET", "/v1/models")));
}

TEST(ApiKeyTest, ChatPageLoadsWithoutKey) {
  ApiKeyCheck check("sk-secret");
  EXPECT_TRUE(check.Allows(Make("GET", "/")));
  EXPECT_TRUE(check.Allows(Make("HEAD", "/")));
  EXPECT_TRUE(check.Allows(Make("GET", "/static/chat.js")));
  EXPECT_FALSE(check.Allows(Make("POST", "/")));
  EXPECT_FALSE(check.Allows(Make("POST", "/static/chat.js")));
  EXPECT_FALSE(check.Allows(Make("GET", "/staticfile")));
  EXPECT_FALSE(check.Allows(Make("GET", "/v1/models")));
}

TEST(ApiKeyTest, AdminRoutesNeedTheAdminKeyWhenSet) {
  ApiKeyCheck both("sk-user", "sk-admin");
  EXPECT_FALSE(both.Allows(Make("POST", "/flush_cache"), /*admin_route=*/true));
  EXPECT_FALSE(both.Allows(Make("POST", "/flush_cache", "Bearer sk-user"), true));
  EXPECT_TRUE(both.Allows(Make("POST", "/flush_cache", "Bearer sk-admin"), true));
  EXPECT_TRUE(both.Allows(Make("POST", "/generate", "Bearer sk-user"), false));
  EXPECT_FALSE(both.Allows(Make("POST", "/generate", "Bearer sk-admin"), false));

  ApiKeyCheck admin_only("", "sk-admin");  // user routes open, admin routes keyed
  EXPECT_TRUE(admin_only.Allows(Make("POST", "/generate"), false));
  EXPECT_FALSE(admin_only.Allows(Make("POST", "/abort_request"), true));
  EXPECT_TRUE(admin_only.Allows(Make("POST", "/abort_request", "Bearer sk-admin"), true));

  ApiKeyCheck user_only("sk-user");  // without an admin key, admin routes take the API key
  EXPECT_TRUE(user_only.Allows(Make("POST", "/flush_cache", "Bearer sk-user"), true));
  EXPECT_FALSE(user_only.Allows(Make("POST", "/flush_cache"), true));
}

TEST(ApiKeyTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("ab", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abcd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("", "abc"));
}

}  // namespace
}  // namespace radixserve::http

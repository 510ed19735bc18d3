#include "http/host_guard.h"

#include <gtest/gtest.h>

namespace radixserve::http {
namespace {

Request WithHost(const std::string& host) {
  Request r;
  r.method = "GET";
  r.path = "/v1/models";
  r.headers = {{"host", host}};
  return r;
}

TEST(HostGuardTest, LoopbackListenerAcceptsOnlyLoopbackNames) {
  HostGuard guard("127.0.0.1", {});
  ASSERT_TRUE(guard.enabled());
  for (const char* host : {"127.0.0.1:30000", "localhost:30000", "LOCALHOST", "[::1]:8080",
                           "app.localhost:1", "127.0.0.1"}) {
    EXPECT_TRUE(guard.Allows(WithHost(host))) << host;
  }
  for (const char* host :
       {"evil.example", "evil.example:30000", "127.0.0.1.evil.example", "localhost.evil.example"}) {
    EXPECT_FALSE(guard.Allows(WithHost(host))) << host;
  }
  Request no_host;
  EXPECT_TRUE(guard.Allows(no_host));
}

TEST(HostGuardTest, AllowedHostsAndWildcard) {
  HostGuard listed("localhost", {"Proxy.Internal"});
  EXPECT_TRUE(listed.Allows(WithHost("proxy.internal:30000")));
  EXPECT_FALSE(listed.Allows(WithHost("other.internal")));
  HostGuard any("127.0.0.1", {"*"});
  EXPECT_FALSE(any.enabled());
  EXPECT_TRUE(any.Allows(WithHost("evil.example")));
}

TEST(HostGuardTest, NonLoopbackListenerIsNotGuarded) {
  HostGuard guard("0.0.0.0", {});
  EXPECT_FALSE(guard.enabled());
  EXPECT_TRUE(guard.Allows(WithHost("evil.example")));
}

}  // namespace
}  // namespace radixserve::http

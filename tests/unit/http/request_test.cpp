#include "http/request.h"

#include <gtest/gtest.h>

namespace radixserve::http {
namespace {

TEST(RequestTest, TargetAndQuery) {
  auto split = SplitTarget("/v1/models/org%2Fname?x=1&y=a+b%21&flag");
  ASSERT_TRUE(split);
  EXPECT_EQ(split->first, "/v1/models/org/name");
  Request r;
  r.query = split->second;
  EXPECT_EQ(r.query_param("y").value_or("?"), "a b!");
  EXPECT_EQ(r.query_param("flag").value_or("?"), "");
  EXPECT_FALSE(r.query_param("z"));
  EXPECT_FALSE(SplitTarget("/bad%4"));
  EXPECT_FALSE(SplitTarget("/bad%zz"));
  EXPECT_FALSE(SplitTarget("/nul%00"));
}

TEST(RequestTest, Headers) {
  Request r;
  r.headers = {{"content-type", "Application/JSON; charset=utf-8"}};
  EXPECT_EQ(r.media_type(), "application/json");
  EXPECT_EQ(r.header("Content-Type").value_or(""), "Application/JSON; charset=utf-8");
  EXPECT_FALSE(r.header("authorization"));
}

}  // namespace
}  // namespace radixserve::http

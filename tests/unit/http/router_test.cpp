#include "http/router.h"

#include <gtest/gtest.h>

namespace radixserve::http {
namespace {

Handler Named(std::string* out, std::string name) {
  return [out, name](const Request&, ResponderPtr) { *out = name; };
}

TEST(RouterTest, ExactPrefixAndMethods) {
  std::string hit;
  Router router;
  router.Add({"GET"}, "/v1/models", Named(&hit, "list"));
  router.AddPrefix({"GET"}, "/v1/models/", Named(&hit, "one"));
  router.Add({"GET", "POST"}, "/flush_cache", Named(&hit, "flush"));
  router.Add({"POST"}, "/generate", Named(&hit, "gen"));
  router.Add({"PUT"}, "/generate", Named(&hit, "gen_put"));

  RouteMatch m = router.Match("GET", "/v1/models");
  ASSERT_EQ(m.kind, RouteMatchKind::kFound);
  (*m.handler)(Request{}, nullptr);
  EXPECT_EQ(hit, "list");

  m = router.Match("GET", "/v1/models/org/name");
  ASSERT_EQ(m.kind, RouteMatchKind::kFound);
  EXPECT_EQ(m.path_param, "org/name");
  (*m.handler)(Request{}, nullptr);
  EXPECT_EQ(hit, "one");

  m = router.Match("PUT", "/generate");
  ASSERT_EQ(m.kind, RouteMatchKind::kFound);
  (*m.handler)(Request{}, nullptr);
  EXPECT_EQ(hit, "gen_put");

  m = router.Match("GET", "/generate");
  EXPECT_EQ(m.kind, RouteMatchKind::kMethodNotAllowed);
  EXPECT_EQ(m.allowed, (std::vector<std::string>{"POST", "PUT"}));

  EXPECT_EQ(router.Match("GET", "/nope").kind, RouteMatchKind::kNotFound);
  EXPECT_EQ(router.Match("GET", "/v1/models/").kind, RouteMatchKind::kNotFound);  // empty param
  EXPECT_EQ(router.Match("GET", "/v1/model").kind, RouteMatchKind::kNotFound);
}

TEST(RouterTest, HeadFallsBackToGet) {
  std::string hit;
  Router router;
  router.Add({"GET"}, "/health", Named(&hit, "health"));
  EXPECT_EQ(router.Match("HEAD", "/health").kind, RouteMatchKind::kFound);
  EXPECT_EQ(router.Match("POST", "/health").kind, RouteMatchKind::kMethodNotAllowed);
}

TEST(RouterTest, LongestPrefixWins) {
  std::string hit;
  Router router;
  router.AddPrefix({"GET"}, "/a/", Named(&hit, "a"));
  router.AddPrefix({"GET"}, "/a/b/", Named(&hit, "ab"));
  RouteMatch m = router.Match("GET", "/a/b/c");
  ASSERT_EQ(m.kind, RouteMatchKind::kFound);
  (*m.handler)(Request{}, nullptr);
  EXPECT_EQ(hit, "ab");
  EXPECT_EQ(m.path_param, "c");
}

TEST(RouterTest, RoutePathNamesTheDeclaredRoute) {
  std::string hit;
  Router router;
  router.Add({"GET"}, "/v1/models", Named(&hit, "list"));
  router.AddPrefix({"GET"}, "/v1/models/", Named(&hit, "one"), "model");
  router.AddPrefix({"GET"}, "/files/", Named(&hit, "file"));
  EXPECT_EQ(router.Match("GET", "/v1/models").route_path, "/v1/models");
  EXPECT_EQ(router.Match("GET", "/v1/models/a/b").route_path, "/v1/models/{model}");
  EXPECT_EQ(router.Match("GET", "/files/x").route_path, "/files/{path}");
  EXPECT_EQ(router.Match("GET", "/nothing").route_path, "");
}

}  // namespace
}  // namespace radixserve::http

// The chat page's routes on the HTTP router: / and /static/<name>, GET (and HEAD through the
// router's fallback) only.
#include "web/web_routes.h"

#include <gtest/gtest.h>

#include "http/router.h"

namespace radixserve::web {
namespace {

http::Router PageRouter() {
  http::Router router;
  AddWebRoutes(router);
  return router;
}

TEST(WebRoutes, IndexAndStaticFilesAreRouted) {
  http::Router router = PageRouter();
  EXPECT_EQ(router.Match("GET", "/").kind, http::RouteMatchKind::kFound);
  EXPECT_EQ(router.Match("HEAD", "/").kind, http::RouteMatchKind::kFound);
  http::RouteMatch script = router.Match("GET", "/static/chat.js");
  ASSERT_EQ(script.kind, http::RouteMatchKind::kFound);
  EXPECT_EQ(script.path_param, "chat.js");
}

TEST(WebRoutes, OnlyGetIsAllowed) {
  http::Router router = PageRouter();
  EXPECT_EQ(router.Match("POST", "/").kind, http::RouteMatchKind::kMethodNotAllowed);
  EXPECT_EQ(router.Match("DELETE", "/static/chat.js").kind,
            http::RouteMatchKind::kMethodNotAllowed);
}

TEST(WebRoutes, OtherPathsAreLeftToOtherRoutes) {
  http::Router router = PageRouter();
  EXPECT_EQ(router.Match("GET", "/static").kind, http::RouteMatchKind::kNotFound);
  EXPECT_EQ(router.Match("GET", "/index.html").kind, http::RouteMatchKind::kNotFound);
  EXPECT_EQ(router.Match("GET", "/v1/models").kind, http::RouteMatchKind::kNotFound);
}

}  // namespace
}  // namespace radixserve::web

#include "web/web_routes.h"

#include <string>

#include "http/http_error.h"
#include "web/web_asset.h"

namespace radixserve::web {
namespace {

constexpr std::string_view kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

void SendAsset(const http::ResponderPtr& responder, std::string_view name) {
  const WebAsset* asset = FindAsset(name);
  if (asset == nullptr) {
    responder->Send(404, std::string(http::kJsonContentType),
                    http::ErrorBody(404, "Not Found", "NotFoundError"));
    return;
  }
  // no-cache: the browser revalidates, so a rebuilt server never runs a stale page.
  responder->Send(200, std::string(ContentTypeFor(asset->name)), std::string(asset->bytes),
                  {{"Cache-Control", "no-cache"},
                   {"X-Content-Type-Options", "nosniff"},
                   {"Content-Security-Policy", std::string(kContentSecurityPolicy)}});
}

}  // namespace

void AddWebRoutes(http::Router& router) {
  router.Add({"GET"}, std::string(kIndexPath),
             [](const http::Request&, http::ResponderPtr responder) {
               SendAsset(responder, "index.html");
             });
  router.AddPrefix({"GET"}, std::string(kStaticPrefix),
                   [](const http::Request& request, http::ResponderPtr responder) {
                     SendAsset(responder, request.path_param);
                   });
}

}  // namespace radixserve::web

#include "main/api_bridge.h"

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "api/json_fields.h"
#include "api/routes.h"
#include "http/request.h"

namespace radixserve {
namespace {

// The decoded name=value pairs of a raw query string; pairs that do not decode are skipped, and
// a repeated name keeps its first value.
std::map<std::string, std::string> QueryParams(std::string_view query) {
  std::map<std::string, std::string> out;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const size_t eq = pair.find('=');
    std::optional<std::string> name = http::PercentDecode(pair.substr(0, eq), true);
    std::optional<std::string> value = http::PercentDecode(
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true);
    if (name && value && !name->empty()) out.emplace(std::move(*name), std::move(*value));
  }
  return out;
}

}  // namespace

http::Router BuildRouter(api::ServerContext& ctx) {
  http::Router router;
  for (api::ApiRoute& route : api::ApiRoutes()) {
    http::Handler handler = [&ctx, handle = route.handler](const http::Request& request,
                                                           http::ResponderPtr responder) {
      api::ApiRequest api_request{.method = request.method,
                                  .path = request.path,
                                  .path_param = request.path_param,
                                  .content_type = request.media_type(),
                                  .body = request.body,
                                  .query = QueryParams(request.query)};
      if (!ctx.metrics_labels_header.empty()) {
        if (std::optional<std::string_view> value = request.header(ctx.metrics_labels_header)) {
          responder->metric_labels = api::ParseLabelHeader(*value, ctx.metrics_labels_header);
        }
      }
      handle(ctx, api_request, std::move(responder));
    };
    const http::RouteAccess access =
        route.admin ? http::RouteAccess::kAdmin : http::RouteAccess::kUser;
    if (route.prefix) {
      router.AddPrefix(route.methods, route.path, std::move(handler), route.param_name, access);
    } else {
      router.Add(route.methods, route.path, std::move(handler), access);
    }
  }
  return router;
}

}  // namespace radixserve

#include "http/dispatcher.h"

#include <exception>

#include "common/log.h"
#include "http/cors.h"
#include "http/http_error.h"

namespace radixserve::http {

namespace {
constexpr std::string_view kUnknownEndpoint = "Unknown";  // SGLang's label without a route
}  // namespace

Dispatcher::Dispatcher(Router router, ApiKeyCheck api_key,
                       std::function<void(const ResponseInfo&)> on_response, CorsPolicy cors,
                       HostGuard host_guard)
    : router_(std::move(router)),
      api_key_(std::move(api_key)),
      cors_(std::move(cors)),
      host_guard_(std::move(host_guard)),
      on_response_(std::move(on_response)) {}

void Dispatcher::Dispatch(Request request, ResponderPtr responder) const {
  RouteMatch match = router_.Match(request.method, request.path);
  if (on_response_) {
    responder->SetObserver(
        &on_response_, request.method,
        match.kind == RouteMatchKind::kFound ? match.route_path : std::string(kUnknownEndpoint));
  }
  if (!host_guard_.Allows(request)) {
    responder->Send(403, std::string(kJsonContentType),
                    ErrorBody(403,
                              "The Host header names neither this machine's loopback nor an "
                              "--allowed-hosts entry.",
                              "ForbiddenError"));
    return;
  }
  if (IsCorsPreflight(request)) {
    PreflightAnswer answer = cors_.AnswerPreflight(request);
    responder->Send(answer.status, "text/plain; charset=utf-8", std::move(answer.body),
                    std::move(answer.headers));
    return;
  }
  responder->SetDefaultHeaders(cors_.ResponseHeaders(request));
  if (!api_key_.Allows(
          request, match.kind == RouteMatchKind::kFound && match.access == RouteAccess::kAdmin)) {
    responder->Send(401, std::string(kJsonContentType), UnauthorizedBody());
    return;
  }

  if (match.kind == RouteMatchKind::kNotFound) {
    responder->Send(404, std::string(kJsonContentType),
                    ErrorBody(404, "Not Found", "NotFoundError"));
    return;
  }
  if (match.kind == RouteMatchKind::kMethodNotAllowed) {
    std::string allow;
    for (const std::string& m : match.allowed) allow += (allow.empty() ? "" : ", ") + m;
    responder->Send(405, std::string(kJsonContentType),
                    ErrorBody(405, "Method Not Allowed", "MethodNotAllowedError"),
                    {{"Allow", allow}});
    return;
  }

  request.path_param = std::move(match.path_param);
  try {
    (*match.handler)(request, responder);
  } catch (const std::exception& e) {
    RADIX_LOG_ERROR("http: handler for {} {} threw: {}", request.method, request.path, e.what());
    responder->Send(
        500, std::string(kJsonContentType),
        ErrorBody(500, std::string("Internal server error: ") + e.what(), "InternalServerError"));
  }
}

}  // namespace radixserve::http

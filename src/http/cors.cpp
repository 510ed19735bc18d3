#include "http/cors.h"

#include <array>
#include <string_view>

namespace radixserve::http {
namespace {

// What Starlette expands allow_methods=["*"] to.
constexpr std::array<std::string_view, 7> kAllowedMethods = {"DELETE", "GET",  "HEAD", "OPTIONS",
                                                             "PATCH",  "POST", "PUT"};
constexpr std::string_view kAllowedMethodsHeader = "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT";

}  // namespace

bool IsCorsPreflight(const Request& request) {
  return request.method == "OPTIONS" && request.header("origin").has_value() &&
         request.header("access-control-request-method").has_value();
}

PreflightAnswer AnswerCorsPreflight(const Request& request) {
  PreflightAnswer answer;
  std::string origin(request.header("origin").value_or(""));
  std::string_view method = request.header("access-control-request-method").value_or("");
  answer.headers = {{"Vary", "Origin"},
                    {"Access-Control-Allow-Methods", std::string(kAllowedMethodsHeader)},
                    {"Access-Control-Max-Age", "600"},
                    {"Access-Control-Allow-Credentials", "true"},
                    {"Access-Control-Allow-Origin", origin}};
  if (auto requested = request.header("access-control-request-headers")) {
    answer.headers.emplace_back("Access-Control-Allow-Headers", std::string(*requested));
  }
  bool method_ok = false;
  for (std::string_view m : kAllowedMethods) method_ok = method_ok || m == method;
  if (method_ok) {
    answer.body = "OK";
  } else {
    answer.status = 400;
    answer.body = "Disallowed CORS method";
  }
  return answer;
}

HeaderList CorsResponseHeaders(const Request& request) {
  auto origin = request.header("origin");
  if (!origin) return {};
  if (request.header("cookie")) {
    return {{"Access-Control-Allow-Origin", std::string(*origin)},
            {"Access-Control-Allow-Credentials", "true"},
            {"Vary", "Origin"}};
  }
  return {{"Access-Control-Allow-Origin", "*"}, {"Access-Control-Allow-Credentials", "true"}};
}

}  // namespace radixserve::http

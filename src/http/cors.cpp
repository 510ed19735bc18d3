#include "http/cors.h"

#include <algorithm>
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

CorsPolicy::CorsPolicy(std::vector<std::string> allowed_origins) {
  for (std::string& origin : allowed_origins) {
    if (origin == "*") {
      any_ = true;
    } else {
      while (!origin.empty() && origin.back() == '/') origin.pop_back();
      listed_.push_back(std::move(origin));
    }
  }
}

HeaderList CorsPolicy::OriginHeaders(const std::string& origin) const {
  if (std::find(listed_.begin(), listed_.end(), origin) != listed_.end()) {
    return {{"Access-Control-Allow-Origin", origin},
            {"Access-Control-Allow-Credentials", "true"},
            {"Vary", "Origin"}};
  }
  if (any_) return {{"Access-Control-Allow-Origin", "*"}};
  return {};
}

PreflightAnswer CorsPolicy::AnswerPreflight(const Request& request) const {
  PreflightAnswer answer;
  const std::string origin(request.header("origin").value_or(""));
  std::string_view method = request.header("access-control-request-method").value_or("");
  answer.headers = OriginHeaders(origin);
  const bool origin_ok = !answer.headers.empty();
  answer.headers.emplace_back("Access-Control-Allow-Methods", std::string(kAllowedMethodsHeader));
  answer.headers.emplace_back("Access-Control-Max-Age", "600");
  if (auto requested = request.header("access-control-request-headers")) {
    answer.headers.emplace_back("Access-Control-Allow-Headers", std::string(*requested));
  }
  const bool method_ok =
      std::find(kAllowedMethods.begin(), kAllowedMethods.end(), method) != kAllowedMethods.end();
  if (!origin_ok) {
    answer.status = 400;
    answer.body = "Disallowed CORS origin";
  } else if (!method_ok) {
    answer.status = 400;
    answer.body = "Disallowed CORS method";
  } else {
    answer.body = "OK";
  }
  return answer;
}

HeaderList CorsPolicy::ResponseHeaders(const Request& request) const {
  auto origin = request.header("origin");
  if (!origin) return {};
  return OriginHeaders(std::string(*origin));
}

}  // namespace radixserve::http

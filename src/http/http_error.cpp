#include "http/http_error.h"

#include <nlohmann/json.hpp>

#include "api/api_error.h"

namespace radixserve::http {

std::string ErrorBody(int status, std::string_view message, std::string_view type) {
  // ToJsonText replaces invalid UTF-8 (a path echoed into a message) instead of throwing.
  return api::ToJsonText(
      api::ApiError{status, std::string(message), std::string(type), {}}.OpenAiBody());
}

std::string UnauthorizedBody() { return nlohmann::json{{"error", "Unauthorized"}}.dump(); }

}  // namespace radixserve::http

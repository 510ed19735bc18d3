#include "http/http_error.h"

#include <nlohmann/json.hpp>

namespace radixserve::http {

std::string ErrorBody(int status, std::string_view message, std::string_view type) {
  nlohmann::json body = {{"object", "error"},
                         {"message", std::string(message)},
                         {"type", std::string(type)},
                         {"param", nullptr},
                         {"code", status}};
  // Replace invalid UTF-8 (a path echoed into a message) instead of throwing.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string UnauthorizedBody() { return nlohmann::json{{"error", "Unauthorized"}}.dump(); }

}  // namespace radixserve::http

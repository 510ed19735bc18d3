#include "http/api_key.h"

namespace radixserve::http {

ApiKeyCheck::ApiKeyCheck(std::string api_key, std::string admin_api_key)
    : expected_header_(api_key.empty() ? std::string() : "Bearer " + api_key),
      expected_admin_header_(admin_api_key.empty() ? std::string() : "Bearer " + admin_api_key) {}

bool ApiKeyCheck::Allows(const Request& request, bool admin_route) const {
  if (admin_route && !expected_admin_header_.empty() && request.method != "OPTIONS") {
    auto header = request.header("authorization");
    return header.has_value() && ConstantTimeEquals(*header, expected_admin_header_);
  }
  if (!enabled() || request.method == "OPTIONS") return true;
  if (request.path.starts_with("/health") || request.path.starts_with("/metrics")) return true;
  // The built-in chat page (src/web) loads without a key; the API calls it makes carry one.
  bool page_read = request.method == "GET" || request.method == "HEAD";
  if (page_read && (request.path == "/" || request.path.starts_with("/static/"))) return true;
  auto header = request.header("authorization");
  return header.has_value() && ConstantTimeEquals(*header, expected_header_);
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Walk the expected length whatever the input so timing reveals nothing about matching bytes.
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (std::size_t i = 0; i < b.size(); ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0u;
    diff |= static_cast<unsigned>(x ^ static_cast<unsigned char>(b[i]));
  }
  volatile unsigned sink = diff;  // keep the loop from being short-circuited
  return sink == 0;
}

}  // namespace radixserve::http

// ApiKeyCheck: SGLang's --api-key and --admin-api-key middleware. With an API key set, every
// request needs the header "Authorization: Bearer <key>" exactly, except OPTIONS requests, paths
// starting with "/health" or "/metrics", and GET/HEAD of the chat page ("/" and "/static/...";
// its API calls carry the key). Admin routes (Router access level kAdmin) need the admin key when
// one is set - the API key alone is refused - and otherwise follow the API key rule. Keys are
// compared in constant time (no early exit on the first differing byte).
// Immutable after construction; safe to call from any thread.
#pragma once

#include <string>
#include <string_view>

#include "http/request.h"

namespace radixserve::http {

class ApiKeyCheck {
 public:
  explicit ApiKeyCheck(std::string api_key, std::string admin_api_key = "");

  bool enabled() const { return !expected_header_.empty(); }
  // True when `request` may proceed (no key configured, exempt, or the right bearer token).
  bool Allows(const Request& request, bool admin_route = false) const;

 private:
  std::string expected_header_;        // "Bearer <key>", or empty when no key is configured
  std::string expected_admin_header_;  // "Bearer <admin key>", or empty
};

// Compares two strings in time that depends only on their lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace radixserve::http

// ApiKeyCheck: SGLang's --api-key middleware. With a key set, every request needs the header
// "Authorization: Bearer <key>" exactly, except OPTIONS requests, paths starting with "/health"
// or "/metrics", and GET/HEAD of the chat page ("/" and "/static/..."; its API calls carry the
// key). The key is compared in constant time (no early exit on the first differing byte).
// Immutable after construction; safe to call from any thread.
#pragma once

#include <string>
#include <string_view>

#include "http/request.h"

namespace radixserve::http {

class ApiKeyCheck {
 public:
  explicit ApiKeyCheck(std::string api_key);

  bool enabled() const { return !expected_header_.empty(); }
  // True when `request` may proceed (no key configured, exempt, or the right bearer token).
  bool Allows(const Request& request) const;

 private:
  std::string expected_header_;  // "Bearer <key>", or empty when no key is configured
};

// Compares two strings in time that depends only on their lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace radixserve::http

// Error bodies the HTTP layer itself produces (before any API handler runs). Request-level errors
// (bad JSON, bad fields, engine failures) are mapped by src/api's error mapper instead.
#pragma once

#include <string>
#include <string_view>

namespace radixserve::http {

// {"object":"error","message":...,"type":...,"param":null,"code":status}: the OpenAI-shaped body
// SGLang's ErrorResponse uses.
std::string ErrorBody(int status, std::string_view message, std::string_view type);

// The body SGLang's API-key middleware answers with: {"error":"Unauthorized"} (status 401).
std::string UnauthorizedBody();

inline constexpr std::string_view kJsonContentType = "application/json";

}  // namespace radixserve::http

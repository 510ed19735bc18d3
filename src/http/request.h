// Request: one parsed HTTP request as handlers see it. Immutable once handed to a handler.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace radixserve::http {

// Header fields in arrival order. Request header names are lower-cased by the parser; response
// headers are written as given.
using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;  // upper-case token as sent: "GET", "POST", ...
  std::string target;  // raw request target: "/v1/models/x?y=1"
  std::string path;    // target before '?', percent-decoded
  std::string query;   // raw text after '?' (not decoded); empty if none
  HeaderList headers;  // names lower-cased
  std::string body;
  std::string path_param;  // filled by the router for prefix routes (e.g. {model}); else empty

  // The first value of header `name` (case-insensitive), if present.
  std::optional<std::string_view> header(std::string_view name) const;
  // The Content-Type media type, lower-cased, without parameters ("application/json").
  std::string media_type() const;
  // The decoded value of query parameter `name` ('+' means space), if present.
  std::optional<std::string> query_param(std::string_view name) const;
};

// Splits a request target into a decoded path and the raw query. Returns nullopt when the path
// holds a malformed percent escape or a decoded NUL.
std::optional<std::pair<std::string, std::string>> SplitTarget(std::string_view target);

// Percent-decodes `text`; with `plus_is_space` also maps '+' to ' ' (query strings).
std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space);

}  // namespace radixserve::http

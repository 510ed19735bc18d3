// Request bodies: the one way every API route turns body text into JSON, with the limits that keep
// a hostile body from hurting the server.
//
// nlohmann's parser accepts any nesting depth, and later recursion over the value (copies,
// dump(), template rendering) would overflow an I/O thread's stack. So the depth is bounded
// before parsing, with a linear scan that allocates nothing; numbers that overflow a double
// (1e999) are refused as well, since no field accepts an infinity.
//
// Thread safety: pure functions; call from any thread.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "common/status.h"

namespace radixserve::api {

// Deepest accepted nesting of arrays and objects in a request body (the top-level value counts
// as level 1). Real requests (chat messages with content parts, tool schemas) stay far below it.
inline constexpr int kMaxJsonDepth = 128;

// Ok if `text` nests arrays/objects at most `max_depth` deep (strings are skipped, escapes
// honoured); kInvalidArgument naming the limit otherwise. Does not validate the JSON.
Status CheckJsonDepth(std::string_view text, int max_depth = kMaxJsonDepth);

// The body as a JSON value, or kInvalidArgument: not JSON, nested deeper than kMaxJsonDepth, or
// holding a number outside the double range.
Expected<nlohmann::json> ParseJsonBody(std::string_view text);
// The same, keeping the client's key order (chat templates render tools and arguments with
// `tojson`, which shows the order).
Expected<nlohmann::ordered_json> ParseOrderedJsonBody(std::string_view text);

// The body of a route that takes a JSON object: the object, or the 400 to answer (a schema failure,
// InvalidRequest): the reasons above, or "The request body must be a JSON object.".
ApiExpected<nlohmann::json> ParseJsonObjectBody(std::string_view text);
ApiExpected<nlohmann::ordered_json> ParseOrderedJsonObjectBody(std::string_view text);
// ParseJsonObjectBody for routes whose fields all have defaults: an empty body is {}.
ApiExpected<nlohmann::json> ParseOptionalJsonObjectBody(std::string_view text);

}  // namespace radixserve::api

// WithJsonWhitespaceOptions: SGLang's --constrained-json-disable-any-whitespace and
// --constrained-json-whitespace-pattern expressed as llguidance JSON options, merged into a
// schema's "x-guidance" object (llguidance's per-schema JSON compile options):
//   whitespace_flexible = any_whitespace   (false: no whitespace between JSON tokens)
//   whitespace_pattern  = pattern          (when non-empty: the regex allowed between tokens)
// Options the schema already sets in its own "x-guidance" object win. Key order is preserved
// (it decides the order of object properties in the output). Pure function; any thread.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace radixserve::sampling {

// Errors (kInvalidArgument): `schema` is not JSON, or its "x-guidance" is not an object. Boolean
// schemas (true / false) are returned unchanged.
Expected<std::string> WithJsonWhitespaceOptions(std::string_view schema, bool any_whitespace,
                                                const std::string& pattern);

}  // namespace radixserve::sampling

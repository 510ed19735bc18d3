// Python-compatible JSON text: what SGLang's parsers produce with `json.dumps(value,
// ensure_ascii=False)` — ", " and ": " separators, keys in insertion order, non-ASCII kept raw,
// floats as Python's repr (1.0, 1e+16, 1.5e-07). Tool-call arguments are compared byte for byte
// with SGLang's, so every parser formats them through here.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "chat/chat_template.h"

namespace radixserve::chat {

// json.dumps(value, ensure_ascii=False). Non-finite floats print as JavaScript names (NaN,
// Infinity) as Python does; callers that need strict JSON reject them first.
std::string PyJsonDumps(const Json& value);

// repr(float): the shortest digits that round-trip, fixed notation for exponents in [-4, 16).
std::string PyFloatRepr(double value);

// Appends `text` (UTF-8) as a JSON string body without the quotes, escaped as json.dumps does:
// \" \\ \n \r \t \b \f, other control characters as \u00XX, everything else raw.
void AppendPyJsonEscaped(std::string_view text, std::string& out);

// Python's str() of a JSON scalar, as SGLang's parsers apply to values a schema declares as
// strings: True / False / None, ints, floats via repr, strings unchanged.
std::string PyStr(const Json& value);

}  // namespace radixserve::chat

// Reading JSON that a model is still writing. A streaming tool-call parser sees a value cut off
// at any byte; these scanners report how much of it is final and render that part as Python's
// json.dumps(json.loads(...)) would (py_json.h), so the text streamed so far is always a prefix
// of the text a non-streaming parse of the finished value produces.
//
// Python's json module is the reference: strict grammar (no raw control characters inside
// strings, no leading zeros, no trailing commas); integers keep their digits, other numbers are
// formatted as Python floats; \u escapes are decoded (surrogate pairs joined) and re-escaped as
// json.dumps does. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace radixserve::chat {

enum class JsonScanState { kComplete, kPartial, kInvalid };

struct JsonPrefix {
  JsonScanState state = JsonScanState::kPartial;
  size_t end = 0;         // kComplete: one past the value (trailing whitespace not consumed)
  std::string canonical;  // json.dumps text of the part that can no longer change
};

// Scans one JSON value at text[pos] (leading whitespace skipped). `at_end`: no more text will
// come, so a number running to the end of `text` is complete.
JsonPrefix ScanJsonPrefix(std::string_view text, size_t pos, bool at_end);

// A tool call written as a JSON object {"name": ..., "arguments" | "parameters": ...} in any
// key order, possibly cut off.
struct JsonCallScan {
  JsonScanState state = JsonScanState::kPartial;
  size_t end = 0;
  std::optional<std::string> name;  // set once the "name" string is complete
  bool has_arguments = false;       // an "arguments"/"parameters" value has started
  bool arguments_complete = false;
  std::string arguments;  // canonical prefix of that value ("{}" if the call had none)
};

// Scans a call object at text[pos] (leading whitespace skipped). The first of "parameters" /
// "arguments" (a null value counts as absent) is the arguments; a complete call without one has
// arguments "{}", as SGLang's `parameters or arguments or {}`.
JsonCallScan ScanJsonCall(std::string_view text, size_t pos, bool at_end);

// Decodes a complete JSON string literal at text[pos] (which must be '"'); nullopt when it is
// cut off or malformed. `end` receives the position after the closing quote.
std::optional<std::string> ScanJsonString(std::string_view text, size_t pos, size_t* end);

// The canonical json.dumps text of a complete JSON document (surrounding whitespace allowed);
// nullopt when `text` is not exactly one valid value.
std::optional<std::string> CanonicalJson(std::string_view text);

}  // namespace radixserve::chat

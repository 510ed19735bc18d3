// Python literal syntax, as SGLang's parsers read model text with `ast.literal_eval` (Llama 3's
// single-quoted dicts, schema-typed XML parameter values) and `ast.parse` (the pythonic
// `[f(a=1), g()]` call lists). Produces JSON values: str, int, float, True/False/None, lists,
// tuples (as lists, as json.dumps writes them) and dicts. Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/chat_template.h"

namespace radixserve::chat {

enum class PyLiteralError {
  kNone,
  kSyntax,           // not a Python literal (literal_eval raises)
  kUnrepresentable,  // a literal json.dumps cannot write (bytes, sets, complex, non-str keys
                     // other than int/float/bool/None)
};

struct PyLiteral {
  PyLiteralError error = PyLiteralError::kNone;
  Json value;
  bool ok() const { return error == PyLiteralError::kNone; }
};

// ast.literal_eval(text) followed by json.dumps's conversion (dict keys become strings as
// json.dumps writes them). Surrounding whitespace is allowed.
PyLiteral ParsePyLiteral(std::string_view text);

// One call of a pythonic call list: `name(k=v, ...)`. Arguments that are not literals (names,
// expressions, negative numbers excepted) make `arguments.error` non-kNone.
struct PyCall {
  std::string name;
  PyLiteral arguments;  // an object of the keyword arguments in order
};

// Parses exactly `[call, call, ...]` (whitespace around allowed; calls take keyword arguments
// only). nullopt when `text` is not such a list.
std::optional<std::vector<PyCall>> ParsePyCallList(std::string_view text);

}  // namespace radixserve::chat

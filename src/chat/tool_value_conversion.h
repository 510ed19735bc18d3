// Schema-typed parameter values of the XML-style tool-call formats (qwen3_coder, glm45, step3):
// the model writes each argument as text, and SGLang converts it by the type the tool's JSON
// schema declares. These helpers reproduce those conversions and return the value as
// json.dumps text (py_json.h). Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/chat_template.h"

namespace radixserve::chat {

// json.loads(text) as a Json value (insertion-ordered); nullopt if not one JSON document.
std::optional<Json> PyJsonLoads(std::string_view text);

// int(text) / float(text) of Python (whitespace, '+', '_' between digits accepted); float()
// results that are not finite count as failures, since JSON cannot carry them.
std::optional<std::string> PyIntText(std::string_view text);
std::optional<double> PyFloat(std::string_view text);

// Qwen3CoderDetector._convert_param_value: `type` is the parameter schema's inferred type
// ("" when the parameter is not in the schema, `known_param` false).
std::string ConvertQwen3CoderValue(const std::string& value, bool known_param,
                                   const std::string& type);

// Glm4MoeDetector's parse_arguments + _parse_argument_pairs for one value; `type` is "" when the
// schema does not declare the parameter.
std::string ConvertGlmValue(const std::string& value, const std::string& type);

// Step3Detector: a value whose schema "type" is declared and not "string" is read as JSON, then
// as a Python literal, else kept as text.
std::string ConvertStep3Value(const std::string& value, const Json* declared_type);

// {"k": v, ...} from key / json.dumps-value pairs, a repeated key replacing the earlier value in
// place (Python dict semantics). `close` false leaves the object open for streaming.
std::string JsonObjectText(const std::vector<std::pair<std::string, std::string>>& pairs,
                           bool close);

}  // namespace radixserve::chat

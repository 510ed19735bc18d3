// Python-style rendering of JSON values for log lines, following SGLang's
// dataclass_to_string_truncated: strings as repr() (quotes chosen and escapes applied as Python
// does), lists as str(list), dicts as {'k': v}, true/false/null as True/False/None. A string or
// list longer than `max_length` (code points / elements) keeps its first and last
// max_length / 2 items around " ... ". `skip_names` drops keys of the outermost object only;
// nested values are rendered with `max_length` but without skipping, as SGLang does.
//
// Pure functions.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace radixserve::api {

// Python's repr() of a str given as UTF-8 (invalid bytes count as U+FFFD).
std::string PyRepr(std::string_view utf8);

std::string PyReprTruncated(const nlohmann::ordered_json& value, std::size_t max_length,
                            const std::set<std::string>& skip_names = {});

// "Name(field=value, ...)" for a dataclass whose fields are `fields`' keys, in order.
std::string PyDataclassRepr(std::string_view name, const nlohmann::ordered_json& fields,
                            std::size_t max_length, const std::set<std::string>& skip_names = {});

}  // namespace radixserve::api

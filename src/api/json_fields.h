// Typed reads of a client's JSON fields. Every failure is kInvalidArgument with a message that
// names the field (it becomes a 400), never an exception and never a silent conversion: a bool
// is not an integer, 1.5 is not a token id, and 2^40 does not wrap into an int32.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "common/status.h"

namespace radixserve::api {

// An integer within [min, max]: a JSON integer, or a float with an integral value (pydantic's
// int coercion). `name` appears in the error message.
Expected<int64_t> ReadInt(const nlohmann::json& value, std::string_view name,
                          int64_t min = std::numeric_limits<int64_t>::min(),
                          int64_t max = std::numeric_limits<int64_t>::max());

// Optional fields of `object`: absent or null -> nullopt; otherwise the value must have the type.
Expected<std::optional<bool>> ReadOptionalBool(const nlohmann::json& object, std::string_view key);
Expected<std::optional<int64_t>> ReadOptionalInt(const nlohmann::json& object, std::string_view key,
                                                 int64_t min = std::numeric_limits<int64_t>::min(),
                                                 int64_t max = std::numeric_limits<int64_t>::max());
Expected<std::optional<std::string>> ReadOptionalString(const nlohmann::json& object,
                                                        std::string_view key);

// SGLang's custom metric labels: a JSON object of label name -> string value (`name` appears in
// the error message).
Expected<std::map<std::string, std::string>> ReadLabelMap(const nlohmann::json& value,
                                                          std::string_view name);

// The body's custom_labels field (SGLang's): empty when absent or null.
Expected<std::map<std::string, std::string>> ReadBodyLabels(const nlohmann::json& body);

// The custom-labels header's value (`header` names it in the log): a JSON object of label
// names to strings. Anything else is logged and the request served without custom labels, as
// SGLang does with a header it cannot parse.
std::map<std::string, std::string> ParseLabelHeader(std::string_view value,
                                                    std::string_view header);

// A list of token ids: JSON integers (not bools, not floats) in [0, vocab_size).
Expected<std::vector<int32_t>> ReadTokenIds(const nlohmann::json& value, std::string_view name,
                                            int64_t vocab_size);

// A field read's failure as the schema error a route answers (400 InvalidRequest).
template <typename T>
ApiExpected<T> Field(Expected<T> value) {
  if (!value.ok()) return InvalidRequest(value.status().message());
  return std::move(value).value();
}

}  // namespace radixserve::api

#include "sampling/json_schema_options.h"

#include <nlohmann/json.hpp>

namespace radixserve::sampling {

Expected<std::string> WithJsonWhitespaceOptions(std::string_view schema, bool any_whitespace,
                                                const std::string& pattern) {
  nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(schema, nullptr, false);
  if (parsed.is_discarded()) return InvalidArgument("json_schema is not valid JSON");
  if (!parsed.is_object()) return std::string(schema);
  nlohmann::ordered_json options = {{"whitespace_flexible", any_whitespace}};
  if (!pattern.empty()) options["whitespace_pattern"] = pattern;
  if (auto own = parsed.find("x-guidance"); own != parsed.end()) {
    if (!own->is_object()) return InvalidArgument("json_schema: x-guidance must be an object");
    for (const auto& [key, value] : own->items()) options[key] = value;
  }
  parsed["x-guidance"] = std::move(options);
  return parsed.dump();
}

}  // namespace radixserve::sampling

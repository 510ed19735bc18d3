#include "api/json_body.h"

#include <cmath>

#include <fmt/format.h>

namespace radixserve::api {
namespace {

template <typename Json>
Expected<Json> Parse(std::string_view text) {
  RADIX_RETURN_IF_ERROR(CheckJsonDepth(text));
  bool out_of_range = false;
  typename Json::parser_callback_t check = [&out_of_range](int, typename Json::parse_event_t event,
                                                           Json& parsed) {
    if (event == Json::parse_event_t::value && parsed.is_number_float() &&
        !std::isfinite(parsed.template get<double>())) {
      out_of_range = true;
    }
    return true;
  };
  Json value = Json::parse(text.begin(), text.end(), check, /*allow_exceptions=*/false);
  if (value.is_discarded()) return InvalidArgument("The request body is not valid JSON.");
  if (out_of_range) {
    return InvalidArgument("The request body holds a number outside the range of a double.");
  }
  return value;
}

}  // namespace

Status CheckJsonDepth(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) {
          return InvalidArgument(fmt::format(
              "The request body nests JSON arrays/objects deeper than the limit of {} levels.",
              max_depth));
        }
        break;
      case ']':
      case '}':
        --depth;
        break;
      default:
        break;
    }
  }
  return Status::Ok();
}

Expected<nlohmann::json> ParseJsonBody(std::string_view text) {
  return Parse<nlohmann::json>(text);
}

Expected<nlohmann::ordered_json> ParseOrderedJsonBody(std::string_view text) {
  return Parse<nlohmann::ordered_json>(text);
}

namespace {

template <typename Json>
ApiExpected<Json> ParseObject(std::string_view text) {
  auto parsed = Parse<Json>(text);
  if (!parsed.ok()) return InvalidRequest(parsed.status().message());
  if (!parsed->is_object()) return InvalidRequest("The request body must be a JSON object.");
  return std::move(parsed).value();
}

}  // namespace

ApiExpected<nlohmann::json> ParseJsonObjectBody(std::string_view text) {
  return ParseObject<nlohmann::json>(text);
}

ApiExpected<nlohmann::ordered_json> ParseOrderedJsonObjectBody(std::string_view text) {
  return ParseObject<nlohmann::ordered_json>(text);
}

ApiExpected<nlohmann::json> ParseOptionalJsonObjectBody(std::string_view text) {
  if (text.empty()) return nlohmann::json::object();
  return ParseObject<nlohmann::json>(text);
}

}  // namespace radixserve::api

#include "api/json_fields.h"

#include <cmath>

#include <fmt/format.h>

#include "common/log.h"

namespace radixserve::api {
namespace {

Status OutOfRange(std::string_view name, int64_t min, int64_t max) {
  return InvalidArgument(fmt::format("{} must be an integer in [{}, {}].", name, min, max));
}

}  // namespace

Expected<int64_t> ReadInt(const nlohmann::json& value, std::string_view name, int64_t min,
                          int64_t max) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(max) || (min > 0 && u < static_cast<uint64_t>(min))) {
      return OutOfRange(name, min, max);
    }
    return static_cast<int64_t>(u);
  }
  int64_t out = 0;
  if (value.is_number_integer()) {
    out = value.get<int64_t>();
  } else if (value.is_number_float()) {
    const double d = value.get<double>();
    // 2^63 is exactly representable; anything at or beyond it does not fit an int64.
    if (!std::isfinite(d) || d != std::floor(d) || d >= 9223372036854775808.0 ||
        d < -9223372036854775808.0) {
      return InvalidArgument(fmt::format("{} must be an integer.", name));
    }
    out = static_cast<int64_t>(d);
  } else {
    return InvalidArgument(fmt::format("{} must be an integer.", name));
  }
  if (out < min || out > max) return OutOfRange(name, min, max);
  return out;
}

Expected<std::optional<bool>> ReadOptionalBool(const nlohmann::json& object, std::string_view key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) return InvalidArgument(fmt::format("{} must be a boolean.", key));
  return std::optional<bool>(it->get<bool>());
}

Expected<std::optional<int64_t>> ReadOptionalInt(const nlohmann::json& object, std::string_view key,
                                                 int64_t min, int64_t max) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<int64_t>();
  int64_t value = 0;
  RADIX_ASSIGN_OR_RETURN(value, ReadInt(*it, key, min, max));
  return std::optional<int64_t>(value);
}

Expected<std::optional<std::string>> ReadOptionalString(const nlohmann::json& object,
                                                        std::string_view key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return InvalidArgument(fmt::format("{} must be a string.", key));
  return std::optional<std::string>(it->get<std::string>());
}

Expected<std::map<std::string, std::string>> ReadLabelMap(const nlohmann::json& value,
                                                          std::string_view name) {
  if (!value.is_object()) {
    return InvalidArgument(fmt::format("{} must be an object of label names to strings.", name));
  }
  std::map<std::string, std::string> labels;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!it->is_string()) {
      return InvalidArgument(
          fmt::format("{}: the value of label '{}' must be a string.", name, it.key()));
    }
    labels[it.key()] = it->get<std::string>();
  }
  return labels;
}

Expected<std::map<std::string, std::string>> ReadBodyLabels(const nlohmann::json& body) {
  auto it = body.find("custom_labels");
  if (it == body.end() || it->is_null()) return std::map<std::string, std::string>();
  return ReadLabelMap(*it, "custom_labels");
}

std::map<std::string, std::string> ParseLabelHeader(std::string_view value,
                                                    std::string_view header) {
  const nlohmann::json parsed = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  Expected<std::map<std::string, std::string>> labels =
      parsed.is_discarded()
          ? Expected<std::map<std::string, std::string>>(InvalidArgument("not JSON"))
          : ReadLabelMap(parsed, header);
  if (!labels.ok()) {
    RADIX_LOG_WARN("Ignoring the {} header (custom metric labels): {}", header,
                   labels.status().message());
    return {};
  }
  return std::move(labels).value();
}

Expected<std::vector<int32_t>> ReadTokenIds(const nlohmann::json& value, std::string_view name,
                                            int64_t vocab_size) {
  if (!value.is_array()) {
    return InvalidArgument(fmt::format("{} must be a list of token ids (integers).", name));
  }
  std::vector<int32_t> ids;
  ids.reserve(value.size());
  for (const nlohmann::json& item : value) {
    if (!item.is_number_integer()) {
      return InvalidArgument(fmt::format("{} must be a list of token ids (integers).", name));
    }
    const bool in_range = item.is_number_unsigned()
                              ? item.get<uint64_t>() < static_cast<uint64_t>(vocab_size)
                              : item.get<int64_t>() >= 0 && item.get<int64_t>() < vocab_size;
    if (!in_range) {
      return InvalidArgument(
          fmt::format("{} holds the token id {}, outside the vocabulary [0, {}).", name,
                      item.dump(), vocab_size));
    }
    ids.push_back(static_cast<int32_t>(item.get<int64_t>()));
  }
  return ids;
}

}  // namespace radixserve::api

#include "args/server_args.h"

#include "args/arg_table.h"
#include "common/check.h"

namespace radixserve::args {
namespace {

std::string KeyOf(std::string_view key) {
  const ArgSpec* spec = FindArg(key);
  RADIX_CHECK_MSG(spec != nullptr, std::string(key).c_str());
  return ConfigKey(spec->name);
}

}  // namespace

ServerArgs::ServerArgs() : values_(nlohmann::json::object()) {
  for (const ArgSpec& spec : AllArgs()) {
    values_[ConfigKey(spec.name)] = nlohmann::json::parse(spec.default_value);
  }
}

const nlohmann::json& ServerArgs::Get(std::string_view key) const {
  return values_.at(KeyOf(key));
}

std::optional<int64_t> ServerArgs::GetOptionalInt(std::string_view key) const {
  const nlohmann::json& value = Get(key);
  if (value.is_null()) return std::nullopt;
  return value.get<int64_t>();
}

std::optional<std::string> ServerArgs::GetOptionalString(std::string_view key) const {
  const nlohmann::json& value = Get(key);
  if (value.is_null()) return std::nullopt;
  return value.get<std::string>();
}

void ServerArgs::Set(std::string_view key, nlohmann::json value, bool explicitly) {
  std::string config_key = KeyOf(key);
  values_[config_key] = std::move(value);
  if (explicitly) explicit_.insert(std::move(config_key));
}

bool ServerArgs::IsExplicit(std::string_view key) const {
  return explicit_.find(KeyOf(key)) != explicit_.end();
}

nlohmann::json ServerArgs::PublicValues() const {
  nlohmann::json values = values_;
  for (const char* secret : {"api_key", "admin_api_key"}) {
    if (values.contains(secret) && !values[secret].is_null()) values[secret] = "<redacted>";
  }
  return values;
}

}  // namespace radixserve::args

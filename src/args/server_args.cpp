#include "args/server_args.h"

#include <string>
#include <string_view>

#include "args/arg_table.h"

namespace radixserve::args {

ServerArgs::ServerArgs() : values_(nlohmann::json::object()) {
  for (const ArgSpec& spec : AllArgs()) {
    values_[ConfigKey(spec.name)] = nlohmann::json::parse(spec.default_value);
  }
}

const nlohmann::json& ServerArgs::Get(ArgKey key) const { return values_.at(key.config_key()); }

std::optional<int64_t> ServerArgs::GetOptionalInt(ArgKey key) const {
  const nlohmann::json& value = Get(key);
  if (value.is_null()) return std::nullopt;
  return value.get<int64_t>();
}

std::optional<double> ServerArgs::GetOptionalFloat(ArgKey key) const {
  const nlohmann::json& value = Get(key);
  if (value.is_null()) return std::nullopt;
  return value.get<double>();
}

std::optional<std::string> ServerArgs::GetOptionalString(ArgKey key) const {
  const nlohmann::json& value = Get(key);
  if (value.is_null()) return std::nullopt;
  return value.get<std::string>();
}

void ServerArgs::Set(ArgKey key, nlohmann::json value, bool explicitly) {
  std::string config_key(key.config_key());
  values_[config_key] = std::move(value);
  if (explicitly) explicit_.insert(std::move(config_key));
}

bool ServerArgs::IsExplicit(ArgKey key) const {
  return explicit_.find(key.config_key()) != explicit_.end();
}

namespace {

// The arguments whose values never appear in logs, --print-config or /server_info.
constexpr ArgKey kSecrets[] = {key::kApiKey, key::kAdminApiKey};

}  // namespace

nlohmann::json ServerArgs::PublicValues() const {
  nlohmann::json values = values_;
  for (ArgKey secret : kSecrets) {
    std::string config_key(secret.config_key());
    if (!values[config_key].is_null()) values[config_key] = "<redacted>";
  }
  return values;
}

std::string ServerArgs::PublicCommandLine(int argc, const char* const* argv) {
  std::string out;
  bool redact_next = false;
  for (int i = 0; i < argc; ++i) {
    std::string word = argv[i];
    if (redact_next) {
      word = "<redacted>";
      redact_next = false;
    } else {
      for (ArgKey secret : kSecrets) {
        for (std::string_view spelling : {secret.name(), secret.config_key()}) {
          const std::string flag = "--" + std::string(spelling);
          if (word == flag) redact_next = true;
          if (word.rfind(flag + "=", 0) == 0) word = flag + "=<redacted>";
        }
      }
    }
    if (!out.empty()) out += ' ';
    out += word;
  }
  return out;
}

}  // namespace radixserve::args

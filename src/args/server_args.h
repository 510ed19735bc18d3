// ServerArgs: the resolved value of every argument in the table, keyed by config key
// ("model_path"). Built by ParseServerArgs (arg_parser.h) and completed by ResolveServerArgs
// (validate.h). After resolution it is read-only and may be shared across threads.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace radixserve::args {

class ServerArgs {
 public:
  // Every argument at its table default.
  ServerArgs();

  // The whole configuration: one key per argument. This is what --print-config prints and
  // /server_info returns.
  const nlohmann::json& values() const { return values_; }
  // values() with every secret (--api-key, --admin-api-key) replaced by "<redacted>" when set:
  // what logs, --print-config and /server_info show.
  nlohmann::json PublicValues() const;

  // Value by config key or canonical name ("max_running_requests" or "max-running-requests").
  // The key must name an argument in the table (checked).
  const nlohmann::json& Get(std::string_view key) const;
  bool IsNull(std::string_view key) const { return Get(key).is_null(); }
  int64_t GetInt(std::string_view key) const { return Get(key).get<int64_t>(); }
  double GetFloat(std::string_view key) const { return Get(key).get<double>(); }
  bool GetBool(std::string_view key) const { return Get(key).get<bool>(); }
  std::string GetString(std::string_view key) const { return Get(key).get<std::string>(); }
  std::optional<int64_t> GetOptionalInt(std::string_view key) const;
  std::optional<std::string> GetOptionalString(std::string_view key) const;

  // Sets a value. `explicitly` records that the user gave it (command line or config file), which
  // validation uses to tell a chosen value from a default.
  void Set(std::string_view key, nlohmann::json value, bool explicitly = false);
  bool IsExplicit(std::string_view key) const;

 private:
  nlohmann::json values_;
  std::set<std::string, std::less<>> explicit_;
};

}  // namespace radixserve::args

// ServerArgs: the resolved value of every argument in the table, keyed by config key
// ("model_path"). Built by ParseServerArgs (arg_parser.h) and completed by ResolveServerArgs
// (validate.h). After resolution it is read-only and may be shared across threads.
//
// Values are read and set by ArgKey (arg_key.h): a generated constant (key::kModelPath, from
// args/arg_keys.h, included here) or a string literal holding a canonical name. Both are checked
// against the table when the program is compiled, so every key names an argument.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "args/arg_key.h"
#include "args/arg_keys.h"

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
  // The command line as given (argv joined by spaces) with the value of every secret replaced by
  // "<redacted>", in either spelling and as "--x v" or "--x=v": SGLang's launch_command.
  static std::string PublicCommandLine(int argc, const char* const* argv);

  // The value of one argument. The typed getters require a value of that type (checked by
  // nlohmann::json, which throws on a mismatch); the Optional ones return nullopt when unset.
  const nlohmann::json& Get(ArgKey key) const;
  bool IsNull(ArgKey key) const { return Get(key).is_null(); }
  int64_t GetInt(ArgKey key) const { return Get(key).get<int64_t>(); }
  double GetFloat(ArgKey key) const { return Get(key).get<double>(); }
  bool GetBool(ArgKey key) const { return Get(key).get<bool>(); }
  std::string GetString(ArgKey key) const { return Get(key).get<std::string>(); }
  std::optional<int64_t> GetOptionalInt(ArgKey key) const;
  std::optional<double> GetOptionalFloat(ArgKey key) const;
  std::optional<std::string> GetOptionalString(ArgKey key) const;

  // Sets a value. `explicitly` records that the user gave it (command line or config file), which
  // validation uses to tell a chosen value from a default.
  void Set(ArgKey key, nlohmann::json value, bool explicitly = false);
  bool IsExplicit(ArgKey key) const;

 private:
  nlohmann::json values_;
  std::set<std::string, std::less<>> explicit_;
};

}  // namespace radixserve::args

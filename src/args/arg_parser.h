// Command-line and --config YAML parsing into ServerArgs. Parsing only checks what a single value
// can violate (type, choices, a missing value, an unknown name); cross-argument rules and derived
// defaults are validate.h's job.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "args/arg_spec.h"
#include "args/server_args.h"
#include "common/status.h"

namespace radixserve::args {

struct ParsedCommandLine {
  enum class Action { kRun, kHelp, kVersion };
  Action action = Action::kRun;
  ServerArgs args;
  // One-line notices to log once logging is up (deprecated spellings and the like).
  std::vector<std::string> notices;
};

// Parses argv[1..argc). Errors are InvalidArgument with one line naming the argument, in the form
// "argument --port: invalid int value: 'x'"; the caller prints it and exits with status 2.
Expected<ParsedCommandLine> ParseCommandLine(int argc, const char* const* argv);
Expected<ParsedCommandLine> ParseCommandLine(const std::vector<std::string>& words);

// Converts the words given for one argument into its JSON value (type and choices checked).
// `display` is the spelling the user wrote, used in error messages.
Expected<nlohmann::json> ConvertValue(const ArgSpec& spec, std::string_view display,
                                      const std::vector<std::string>& words);

}  // namespace radixserve::args

namespace radixserve::args {

// If `spelling` is a deprecated alias of `spec`, the one-line notice to log; empty otherwise.
std::string DeprecationNotice(const ArgSpec& spec, std::string_view spelling);

}  // namespace radixserve::args

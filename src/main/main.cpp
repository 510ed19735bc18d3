// radixserve entry point: parse and resolve the server arguments, then serve.
#include <cstdio>
#include <iostream>

#include "args/arg_parser.h"
#include "args/help_text.h"
#include "args/validate.h"
#include "common/log.h"
#include "common/machine.h"
#include "common/version.h"

namespace {

constexpr int kUsageError = 2;

int UsageError(const std::string& message) {
  std::fprintf(stderr, "usage: radixserve --model-path MODEL_PATH [options]  (see --help)\n");
  std::fprintf(stderr, "radixserve: error: %s\n", message.c_str());
  return kUsageError;
}

}  // namespace

int main(int argc, char** argv) {
  using radixserve::args::ParsedCommandLine;
  auto parsed = radixserve::args::ParseCommandLine(argc, argv);
  if (!parsed.ok()) return UsageError(parsed.status().message());
  if (parsed->action == ParsedCommandLine::Action::kHelp) {
    std::cout << radixserve::args::RenderHelp();
    return 0;
  }
  if (parsed->action == ParsedCommandLine::Action::kVersion) {
    std::cout << "radixserve " << radixserve::kVersion << "\n";
    return 0;
  }

  radixserve::args::ServerArgs& args = parsed->args;
  if (!radixserve::InitLogging(args.GetString("log-level"))) {
    return UsageError("argument --log-level: invalid choice: '" + args.GetString("log-level") +
                      "'");
  }
  std::vector<std::string> warnings = std::move(parsed->notices);
  radixserve::Status resolved =
      radixserve::args::ResolveServerArgs(args, radixserve::ProbeMachine(), warnings);
  if (!resolved.ok()) return UsageError(resolved.message());
  for (const std::string& warning : warnings) RADIX_LOG_WARN("{}", warning);

  if (args.GetBool("print-config")) {
    std::cout << args.values().dump(2) << "\n";
    return 0;
  }
  RADIX_LOG_INFO("server_args={}", args.values().dump());
  RADIX_LOG_ERROR(
      "radixserve {}: arguments are valid, but this build cannot load models or serve requests "
      "yet (model loading, the engine and the HTTP server land in later releases)",
      radixserve::kVersion);
  return 1;
}

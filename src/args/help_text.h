// Text generated from the argument table: the --help screen and docs/server_args.md.
#pragma once

#include <string>

namespace radixserve::args {

// The --help screen, grouped like SGLang's reference, one entry per argument with its aliases,
// value type, default, choices and a cpu note when the argument does not fully apply.
std::string RenderHelp();

// docs/server_args.md: the support matrix (argument and aliases with their systems, description,
// default, options, supported on cpu).
std::string RenderServerArgsMarkdown();

}  // namespace radixserve::args

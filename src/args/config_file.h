// The --config YAML file: a mapping of argument names (dash or underscore spelling, with or
// without leading dashes) to values. Scalars are read as the command line would read them;
// sequences give list arguments; mappings give JSON arguments.
#pragma once

#include <string>

#include "args/server_args.h"
#include "common/status.h"

namespace radixserve::args {

// Applies every key of the file to `args` (marked explicit). Errors name the file and the key:
// "argument --config: unknown key 'foo' in cfg.yaml".
Status ApplyConfigFile(const std::string& path, ServerArgs& args,
                       std::vector<std::string>& notices);

}  // namespace radixserve::args

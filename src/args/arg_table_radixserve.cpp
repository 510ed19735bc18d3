// Arguments that radixserve adds on top of the systems it implements.
#include "args/arg_groups.h"
#include "args/arg_table.h"

namespace radixserve::args {

std::vector<ArgSpec> RadixserveArgs() {
  return {
      {.name = "config",
       .type = ArgType::kString,
       .group = group::kRadixserve,
       .help = "Read arguments from this YAML file (keys in dash or underscore spelling). "
               "Arguments given on the command line override the file.",
       .system = System::kSglang},
      {.name = "print-config",
       .type = ArgType::kFlag,
       .default_value = "false",
       .group = group::kRadixserve,
       .help = "Resolve and validate every argument, print the final configuration as JSON "
               "(the object /server_info returns) and exit without loading the model.",
       .system = System::kRadixserve},
      {.name = "threads",
       .type = ArgType::kInt,
       .group = group::kRadixserve,
       .help = "Number of compute threads for the model's kernels. Default: every core this "
               "process may run on.",
       .system = System::kRadixserve},
  };
}

}  // namespace radixserve::args

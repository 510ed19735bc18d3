#include "args/arg_groups.h"
#include "args/arg_table.h"

namespace radixserve::args {

std::vector<ArgSpec> LightllmArgs() { return {}; }

std::vector<ExtraAlias> LightllmAliases() { return {}; }

}  // namespace radixserve::args

#include "args/arg_groups.h"
#include "args/arg_table.h"

namespace radixserve::args {

std::vector<ArgSpec> RtpllmArgs() { return {}; }

std::vector<ExtraAlias> RtpllmAliases() { return {}; }

}  // namespace radixserve::args

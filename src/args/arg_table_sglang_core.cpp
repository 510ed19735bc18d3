#include "args/arg_groups.h"
#include "args/arg_table.h"

namespace radixserve::args {

std::vector<ArgSpec> SglangCoreArgs() { return {}; }

}  // namespace radixserve::args

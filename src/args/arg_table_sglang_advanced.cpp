#include "args/arg_groups.h"
#include "args/arg_table.h"

namespace radixserve::args {

std::vector<ArgSpec> SglangAdvancedArgs() { return {}; }

}  // namespace radixserve::args

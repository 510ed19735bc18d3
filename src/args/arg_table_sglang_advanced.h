// Internal to the argument table: SglangAdvancedArgs() (arg_table.h) is split over two files.
// arg_table_sglang_advanced.cpp holds the groups from "Speculative decoding" to "Offloading" (plus
// the NSA kernel-backend entries) and appends the part below.
#pragma once

#include <vector>

#include "args/arg_spec.h"

namespace radixserve::args {

// Groups "Optimization/debug options" to "Deprecated arguments"; arg_table_sglang_advanced_2.cpp.
std::vector<ArgSpec> SglangAdvancedArgs2();

}  // namespace radixserve::args

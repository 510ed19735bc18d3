// The table of every server argument radixserve accepts. Entries live in several files, one per
// area (arg_table_*.cpp); AllArgs() joins them, applies the alias lists of other systems, checks
// the table's own consistency once (unique names, parseable defaults) and returns it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "args/arg_spec.h"

namespace radixserve::args {

// An extra spelling of an argument that is defined elsewhere in the table (used by the LightLLM
// and RTP-LLM alias lists, which must not edit the SGLang entries).
struct ExtraAlias {
  std::string_view canonical;  // canonical dash-separated name of the target argument
  AliasSpec alias;
};

// Parts of the table, each defined in its own file.
std::vector<ArgSpec> SglangCoreArgs();      // arg_table_sglang_core.cpp
std::vector<ArgSpec> SglangAdvancedArgs();  // arg_table_sglang_advanced.cpp
std::vector<ArgSpec> LightllmArgs();        // arg_table_lightllm.cpp (own arguments)
std::vector<ExtraAlias> LightllmAliases();  // arg_table_lightllm.cpp
std::vector<ArgSpec> RtpllmArgs();          // arg_table_rtpllm.cpp (own arguments)
std::vector<ExtraAlias> RtpllmAliases();    // arg_table_rtpllm.cpp
std::vector<ArgSpec> RadixserveArgs();      // arg_table_radixserve.cpp

// Every argument, in group display order then table order. Built on first use; thread-safe.
const std::vector<ArgSpec>& AllArgs();

// Finds an argument by any spelling (canonical or alias, with or without leading dashes, dashes
// and underscores interchangeable). Returns nullptr if unknown.
const ArgSpec* FindArg(std::string_view spelling);

// "model-path" -> "model_path": the key in the resolved config.
std::string ConfigKey(std::string_view name);

}  // namespace radixserve::args

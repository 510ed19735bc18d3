// The table of every server argument radixserve accepts. The entries live in one data file,
// src/args/server_args.json; src/args/gen_arg_table.py turns it into C++ at build time (the table
// entries, the names ArgKey checks against, and one key:: constant per argument; see
// arg_key.h). AllArgs() checks the table's own consistency once (unique spellings, parseable
// defaults) and returns it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "args/arg_key.h"
#include "args/arg_spec.h"

namespace radixserve::args {

// The entries of server_args.json in file order (arg_table_data.cpp, generated).
std::vector<ArgSpec> GeneratedArgs();

// Every argument, in server_args.json order (which is the group display order). Built on first
// use; thread-safe.
const std::vector<ArgSpec>& AllArgs();

// Finds an argument by any spelling (canonical or alias, with or without leading dashes, dashes
// and underscores interchangeable). Returns nullptr if unknown.
const ArgSpec* FindArg(std::string_view spelling);

// The key of an entry of AllArgs() (checked), for code that walks the table.
ArgKey KeyOf(const ArgSpec& spec);

// "model-path" -> "model_path": the key in the resolved config.
std::string ConfigKey(std::string_view name);

}  // namespace radixserve::args

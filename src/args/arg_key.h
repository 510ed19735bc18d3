// ArgKey: which argument of the table to read or set in ServerArgs, checked when the program is
// compiled. A name that is not in src/args/server_args.json does not compile, so a typo can no
// longer read as "unset" and silently disable a feature.
//
// Outside src/args/ code names arguments by the generated constants of args/arg_keys.h
// (key::kMaxRunningRequests for --max-running-requests): tests/unit/args/arg_readers_test.cpp
// looks for them to check that every argument marked supported is read somewhere.
#pragma once

#include <cstddef>
#include <iterator>
#include <string_view>

#include "args/arg_names.h"  // generated from server_args.json: kArgNames, kConfigKeys

namespace radixserve::args {

struct ArgSpec;

class ArgKey {
 public:
  // From a string literal holding a canonical name in dash or underscore spelling
  // ("max-running-requests", "max_running_requests"); aliases are not accepted. Anything that is
  // not a constant naming an argument of the table fails to compile.
  consteval ArgKey(const char* name) : index_(IndexOf(name)) {}  // NOLINT: implicit on purpose

  // The key with table index `index` (what the generated constants use); compile error when out
  // of range.
  static consteval ArgKey AtIndex(size_t index) {
    if (index >= std::size(kArgNames)) throw "argument index out of range";
    return ArgKey(index);
  }

  // Position in AllArgs(); the canonical name ("max-running-requests"); the key in the resolved
  // config ("max_running_requests").
  constexpr size_t index() const { return index_; }
  constexpr std::string_view name() const { return kArgNames[index_]; }
  constexpr std::string_view config_key() const { return kConfigKeys[index_]; }

  friend constexpr bool operator==(ArgKey a, ArgKey b) { return a.index_ == b.index_; }

 private:
  friend ArgKey KeyOf(const ArgSpec& spec);  // arg_table.h: the key of a table entry at run time

  constexpr explicit ArgKey(size_t index) : index_(index) {}

  static consteval size_t IndexOf(std::string_view name) {
    for (size_t i = 0; i < std::size(kArgNames); ++i) {
      if (kArgNames[i] == name || kConfigKeys[i] == name) return i;
    }
    // Reaching this throw in a constant evaluation is the compile error.
    throw "not the canonical name of an argument in src/args/server_args.json";
  }

  size_t index_;
};

}  // namespace radixserve::args

// The declarative description of one server argument. The table of all of them (arg_table.h),
// generated from src/args/server_args.json, is the single source of truth for the parser, the
// YAML loader, validation, --help and docs/server_args.md.
#pragma once

#include <string_view>
#include <vector>

namespace radixserve::args {

// How the value is spelled on the command line and stored in the resolved config (JSON).
enum class ArgType {
  kFlag,        // store_true: "--x" sets true. "--x=false" / "--x false" also accepted.
  kBool,        // takes a value: true/false/1/0/yes/no/on/off (RTP-LLM's str2bool style).
                // "--x" alone means true.
  kInt,         // 64-bit integer
  kFloat,       // double
  kString,      // any string
  kStringList,  // argparse nargs="+"/"*": one or more following words, stored as a JSON array
  kIntList,     // nargs="+" of ints
  kFloatList,   // nargs="+" of floats
  kJson,        // a string holding JSON; parsed and validated, stored as the parsed JSON value
};

// Whether setting the argument changes behaviour on the cpu device.
enum class Support {
  kYes,      // implemented on cpu
  kPartial,  // some values or parts apply; cpu_note says which
  kNo,       // device- or cluster-specific; accepted with one warning when set
};

// The engine an argument name comes from.
enum class System { kSglang, kLightllm, kRtpllm, kRadixserve };

struct AliasSpec {
  std::string_view name;  // without leading dashes, in the system's own spelling
  System system = System::kSglang;
  bool deprecated = false;  // a one-line notice names the canonical spelling when used
};

struct ArgSpec {
  // Canonical name without leading dashes, dash-separated ("model-path"). The resolved-config key
  // is the same name with underscores ("model_path").
  std::string_view name;
  ArgType type = ArgType::kString;
  // The default as a JSON literal: "null", "true", "30000", "0.5", "\"fcfs\"", "[]".
  // "null" means unset; validation may derive a value (see validate.h).
  std::string_view default_value = "null";
  // Allowed values in their command-line spelling; empty means any value of the type.
  std::vector<std::string_view> choices = {};
  std::string_view group;
  std::string_view help;  // our own words, one or two sentences
  Support cpu = Support::kYes;
  std::string_view cpu_note = "";  // why not / which part, for kPartial and kNo
  // For kPartial: the values (command-line spelling) that apply on cpu. Any other value given
  // explicitly is accepted with one warning quoting cpu_note. Empty: no such check.
  std::vector<std::string_view> cpu_values = {};
  std::vector<AliasSpec> aliases = {};
  System system = System::kSglang;  // where the canonical name comes from
  bool required = false;
  // List types only: argparse's action="append" (one word per occurrence, collected in order)
  // instead of nargs="+".
  bool append = false;
};

std::string_view SystemName(System system);
std::string_view TypeName(ArgType type);
std::string_view SupportName(Support support);

}  // namespace radixserve::args

#include "args/arg_table.h"

#include <algorithm>
#include <functional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "args/arg_names.h"
#include "common/check.h"

namespace radixserve::args {
namespace {

// Spelling key: no leading dashes, underscores as dashes, so "--max_total_token_num" and
// "max-total-token-num" find the same entry.
std::string NormalizeSpelling(std::string_view spelling) {
  while (!spelling.empty() && spelling.front() == '-') spelling.remove_prefix(1);
  std::string key(spelling);
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

struct Table {
  std::vector<ArgSpec> args;
  std::unordered_map<std::string, size_t> by_spelling;
};

Table BuildTable() {
  Table table;
  table.args = GeneratedArgs();
  RADIX_CHECK(table.args.size() == std::size(kArgNames));
  for (size_t i = 0; i < table.args.size(); ++i) {
    const ArgSpec& spec = table.args[i];
    // ArgKey indexes both; they come from one run of the generator.
    RADIX_CHECK_MSG(spec.name == kArgNames[i], std::string(spec.name).c_str());
    RADIX_CHECK_MSG(nlohmann::json::accept(spec.default_value), std::string(spec.name).c_str());
    RADIX_CHECK_MSG(!spec.help.empty(), std::string(spec.name).c_str());
    auto add = [&](std::string_view spelling) {
      std::string key = NormalizeSpelling(spelling);
      auto [pos, inserted] = table.by_spelling.emplace(key, i);
      // The same spelling may be listed twice for one argument (e.g. by two systems).
      RADIX_CHECK_MSG(inserted || pos->second == i, key.c_str());
    };
    add(spec.name);
    for (const AliasSpec& alias : spec.aliases) add(alias.name);
  }
  return table;
}

const Table& GetTable() {
  static const Table table = BuildTable();
  return table;
}

}  // namespace

const std::vector<ArgSpec>& AllArgs() { return GetTable().args; }

const ArgSpec* FindArg(std::string_view spelling) {
  const Table& table = GetTable();
  auto it = table.by_spelling.find(NormalizeSpelling(spelling));
  return it == table.by_spelling.end() ? nullptr : &table.args[it->second];
}

ArgKey KeyOf(const ArgSpec& spec) {
  const std::vector<ArgSpec>& args = AllArgs();
  const ArgSpec* begin = args.data();
  RADIX_CHECK(!std::less<>{}(&spec, begin) && std::less<>{}(&spec, begin + args.size()));
  return ArgKey(static_cast<size_t>(&spec - args.data()));
}

std::string ConfigKey(std::string_view name) {
  std::string key(name);
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

std::string_view SystemName(System system) {
  switch (system) {
    case System::kSglang:
      return "SGLang";
    case System::kLightllm:
      return "LightLLM";
    case System::kRtpllm:
      return "RTP-LLM";
    case System::kRadixserve:
      return "radixserve";
  }
  return "?";
}

std::string_view TypeName(ArgType type) {
  switch (type) {
    case ArgType::kFlag:
      return "flag";
    case ArgType::kBool:
      return "bool";
    case ArgType::kInt:
      return "int";
    case ArgType::kFloat:
      return "float";
    case ArgType::kString:
      return "str";
    case ArgType::kStringList:
      return "str list";
    case ArgType::kIntList:
      return "int list";
    case ArgType::kFloatList:
      return "float list";
    case ArgType::kJson:
      return "JSON";
  }
  return "?";
}

std::string_view SupportName(Support support) {
  switch (support) {
    case Support::kYes:
      return "yes";
    case Support::kPartial:
      return "partial";
    case Support::kNo:
      return "no";
  }
  return "?";
}

}  // namespace radixserve::args

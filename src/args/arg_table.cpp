#include "args/arg_table.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "args/arg_groups.h"
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

size_t GroupRank(std::string_view group) {
  const auto* begin = std::begin(group::kOrder);
  const auto* end = std::end(group::kOrder);
  const auto* it = std::find(begin, end, group);
  RADIX_CHECK_MSG(it != end, "argument group missing from group::kOrder");
  return static_cast<size_t>(it - begin);
}

struct Table {
  std::vector<ArgSpec> args;
  std::unordered_map<std::string, size_t> by_spelling;
};

void Append(std::vector<ArgSpec>& into, std::vector<ArgSpec> part) {
  for (auto& spec : part) into.push_back(std::move(spec));
}

Table BuildTable() {
  Table table;
  Append(table.args, SglangCoreArgs());
  Append(table.args, SglangAdvancedArgs());
  Append(table.args, RadixserveArgs());
  Append(table.args, LightllmArgs());
  Append(table.args, RtpllmArgs());
  std::stable_sort(table.args.begin(), table.args.end(), [](const ArgSpec& a, const ArgSpec& b) {
    return GroupRank(a.group) < GroupRank(b.group);
  });

  std::vector<ExtraAlias> extra = LightllmAliases();
  for (auto& alias : RtpllmAliases()) extra.push_back(alias);
  for (const ExtraAlias& alias : extra) {
    auto it = std::find_if(table.args.begin(), table.args.end(),
                           [&](const ArgSpec& spec) { return spec.name == alias.canonical; });
    RADIX_CHECK_MSG(it != table.args.end(), std::string(alias.canonical).c_str());
    it->aliases.push_back(alias.alias);
  }

  for (size_t i = 0; i < table.args.size(); ++i) {
    const ArgSpec& spec = table.args[i];
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

std::string ConfigKey(std::string_view name) {
  std::string key(name);
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

std::string_view SystemName(System system) {
  switch (system) {
    case System::kSglang: return "SGLang";
    case System::kLightllm: return "LightLLM";
    case System::kRtpllm: return "RTP-LLM";
    case System::kRadixserve: return "radixserve";
  }
  return "?";
}

std::string_view TypeName(ArgType type) {
  switch (type) {
    case ArgType::kFlag: return "flag";
    case ArgType::kBool: return "bool";
    case ArgType::kInt: return "int";
    case ArgType::kFloat: return "float";
    case ArgType::kString: return "str";
    case ArgType::kStringList: return "str list";
    case ArgType::kIntList: return "int list";
    case ArgType::kFloatList: return "float list";
    case ArgType::kJson: return "JSON";
  }
  return "?";
}

std::string_view SupportName(Support support) {
  switch (support) {
    case Support::kYes: return "yes";
    case Support::kPartial: return "partial";
    case Support::kNo: return "no";
  }
  return "?";
}

}  // namespace radixserve::args

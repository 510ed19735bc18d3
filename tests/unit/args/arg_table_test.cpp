#include "args/arg_table.h"

#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "args/arg_parser.h"

namespace radixserve::args {
namespace {

// Every default must be a value the parser itself would accept for the argument.
TEST(ArgTable, DefaultsMatchTypesAndChoices) {
  for (const ArgSpec& spec : AllArgs()) {
    nlohmann::json value = nlohmann::json::parse(spec.default_value);
    if (value.is_null()) continue;
    switch (spec.type) {
      case ArgType::kFlag:
      case ArgType::kBool:
        EXPECT_TRUE(value.is_boolean()) << spec.name;
        break;
      case ArgType::kInt:
        EXPECT_TRUE(value.is_number_integer()) << spec.name;
        break;
      case ArgType::kFloat:
        EXPECT_TRUE(value.is_number()) << spec.name;
        break;
      case ArgType::kString:
        EXPECT_TRUE(value.is_string()) << spec.name;
        break;
      case ArgType::kStringList:
      case ArgType::kIntList:
      case ArgType::kFloatList:
        EXPECT_TRUE(value.is_array()) << spec.name;
        break;
      case ArgType::kJson:
        break;
    }
    if (!spec.choices.empty() && value.is_string()) {
      std::string text = value.get<std::string>();
      bool found = false;
      for (std::string_view choice : spec.choices) found |= choice == text;
      EXPECT_TRUE(found) << spec.name << " default " << text << " is not among its choices";
    }
  }
}

TEST(ArgTable, EveryArgumentIsDocumented) {
  for (const ArgSpec& spec : AllArgs()) {
    EXPECT_FALSE(spec.help.empty()) << spec.name;
    EXPECT_FALSE(spec.group.empty()) << spec.name;
    if (spec.cpu != Support::kYes) {
      EXPECT_FALSE(spec.cpu_note.empty()) << spec.name;
    }
    EXPECT_EQ(spec.name.find('_'), std::string_view::npos) << "canonical names use dashes";
  }
}

TEST(ArgTable, SpellingsAreFoundWithDashesOrUnderscores) {
  for (const ArgSpec& spec : AllArgs()) {
    EXPECT_EQ(FindArg(spec.name), &spec);
    EXPECT_EQ(FindArg("--" + ConfigKey(spec.name)), &spec);
    for (const AliasSpec& alias : spec.aliases) EXPECT_EQ(FindArg(alias.name), &spec);
  }
  EXPECT_EQ(FindArg("--definitely-not-an-argument"), nullptr);
}

TEST(ArgTable, KnownAliases) {
  EXPECT_EQ(FindArg("--model")->name, "model-path");
  EXPECT_EQ(FindArg("--tp")->name, "tp-size");
  EXPECT_EQ(FindArg("--tensor-parallel-size")->name, "tp-size");
  EXPECT_EQ(FindArg("--dp")->name, "dp-size");
  EXPECT_EQ(FindArg("--data-parallel-size")->name, "dp-size");
  EXPECT_EQ(FindArg("--ep")->name, "ep-size");
  EXPECT_EQ(FindArg("--expert-parallel-size")->name, "ep-size");
  EXPECT_EQ(FindArg("--max_total_token_num")->name, "max-total-tokens");
  EXPECT_EQ(FindArg("--mem_fraction")->name, "mem-fraction-static");
}

}  // namespace
}  // namespace radixserve::args

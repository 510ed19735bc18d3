#include "args/arg_parser.h"

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "args/arg_table.h"

namespace radixserve::args {
namespace {

Expected<ParsedCommandLine> Parse(std::vector<std::string> words) {
  words.insert(words.begin(), {"--model-path", "/m"});
  return ParseCommandLine(words);
}

TEST(ArgParser, TypedValuesAndSpellings) {
  auto parsed = Parse({"--port", "31000", "--mem_fraction_static=0.5", "--enable-metrics",
                       "--schedule-policy", "lpm", "--cuda-graph-bs", "1", "2", "4",
                       "--json-model-override-args", R"({"rope_theta": 1.0})"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const ServerArgs& args = parsed->args;
  EXPECT_EQ(args.GetInt("port"), 31000);
  EXPECT_DOUBLE_EQ(args.GetFloat("mem-fraction-static"), 0.5);
  EXPECT_TRUE(args.GetBool("enable_metrics"));
  EXPECT_EQ(args.GetString("schedule-policy"), "lpm");
  EXPECT_EQ(args.Get("cuda-graph-bs"), nlohmann::json({1, 2, 4}));
  EXPECT_EQ(args.Get("json-model-override-args")["rope_theta"], 1.0);
  EXPECT_TRUE(args.IsExplicit("port"));
  EXPECT_FALSE(args.IsExplicit("host"));
}

TEST(ArgParser, FlagsAcceptAnOptionalBooleanWord) {
  auto parsed = Parse({"--enable-metrics", "false", "--disable-radix-cache=true"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_FALSE(parsed->args.GetBool("enable-metrics"));
  EXPECT_TRUE(parsed->args.GetBool("disable-radix-cache"));
}

// argparse's action="append" (LightLLM's --grouping_key): one word per occurrence, collected;
// nargs="+" (--allowed-origins): the words after one occurrence, the last occurrence wins.
TEST(ArgParser, AppendListsCollectOneWordPerOccurrence) {
  auto parsed = Parse({"--grouping_key", "a=1", "--allowed-origins", "x", "y", "--grouping-key",
                       "b=2", "--allowed-origins", "z"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->args.Get("grouping-key"), nlohmann::json({"a=1", "b=2"}));
  EXPECT_EQ(parsed->args.Get("allowed-origins"), nlohmann::json({"z"}));
  auto two_words = Parse({"--grouping_key", "a=1", "b=2"});
  ASSERT_FALSE(two_words.ok());
  EXPECT_NE(two_words.status().message().find("'b=2'"), std::string::npos)
      << two_words.status().message();
}

TEST(ArgParser, NegativeNumbersAreValuesNotOptions) {
  auto parsed = Parse({"--chunked-prefill-size", "-1"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->args.GetInt("chunked-prefill-size"), -1);
}

TEST(ArgParser, AliasesOfOtherSystemsLandOnTheCanonicalKey) {
  auto parsed = ParseCommandLine(std::vector<std::string>{
      "--model_dir", "/m", "--running_max_req_size", "7", "--tensor-parallel-size", "1"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->args.GetString("model-path"), "/m");
  EXPECT_EQ(parsed->args.GetInt("max-running-requests"), 7);
  EXPECT_EQ(parsed->args.GetInt("tp-size"), 1);
}

struct BadCase {
  std::vector<std::string> words;
  std::string expected_fragment;
};

TEST(ArgParser, BadInputNamesTheArgument) {
  const std::vector<BadCase> cases = {
      {{"--no-such"}, "--no-such"},
      {{"--port", "x"}, "argument --port: invalid int value: 'x'"},
      {{"--port"}, "argument --port: expected one argument"},
      {{"--port", "--host", "h"}, "argument --port: expected one argument"},
      {{"--schedule-policy", "best"}, "invalid choice: 'best' (choose from"},
      {{"--mem-fraction-static", "half"}, "invalid float value"},
      {{"--json-model-override-args", "{"}, "invalid JSON value"},
      {{"--cuda-graph-bs"}, "expected at least one argument"},
      {{"positional"}, "unrecognized argument: 'positional'"},
  };
  for (const BadCase& c : cases) {
    auto parsed = Parse(c.words);
    ASSERT_FALSE(parsed.ok()) << c.words[0];
    EXPECT_NE(parsed.status().message().find(c.expected_fragment), std::string::npos)
        << parsed.status().message();
  }
}

TEST(ArgParser, ModelPathIsRequired) {
  auto parsed = ParseCommandLine(std::vector<std::string>{"--port", "1"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("--model-path"), std::string::npos);
}

TEST(ArgParser, HelpAndVersionStopParsing) {
  auto help = ParseCommandLine(std::vector<std::string>{"--help", "--bogus"});
  ASSERT_TRUE(help.ok());
  EXPECT_EQ(help->action, ParsedCommandLine::Action::kHelp);
  auto version = ParseCommandLine(std::vector<std::string>{"--version"});
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(version->action, ParsedCommandLine::Action::kVersion);
}

TEST(ArgParser, ConfigFileIsOverriddenByTheCommandLine) {
  const std::string path = testing::TempDir() + "/radix_args_test.yaml";
  {
    std::ofstream out(path);
    out << "model_path: /yaml\nport: 1234\nmax-running-requests: 3\n"
           "cuda_graph_bs: [8, 16]\nenable-metrics: true\n";
  }
  auto parsed = ParseCommandLine(std::vector<std::string>{"--config", path, "--port", "4321"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->args.GetString("model-path"), "/yaml");
  EXPECT_EQ(parsed->args.GetInt("port"), 4321);
  EXPECT_EQ(parsed->args.GetInt("max-running-requests"), 3);
  EXPECT_EQ(parsed->args.Get("cuda-graph-bs"), nlohmann::json({8, 16}));
  EXPECT_TRUE(parsed->args.GetBool("enable-metrics"));
}

TEST(ArgParser, ConfigFileUnknownKeyIsNamed) {
  const std::string path = testing::TempDir() + "/radix_args_bad.yaml";
  {
    std::ofstream out(path);
    out << "model_path: /m\nnot_an_argument: 1\n";
  }
  auto parsed = ParseCommandLine(std::vector<std::string>{"--config", path});
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("unknown key 'not_an_argument'"), std::string::npos);
}

}  // namespace
}  // namespace radixserve::args

// ToolCallParser: each --tool-call-parser format on outputs written from its documented layout
// (SGLang's detector docstrings and test_function_call_parser.py cases), expected results by
// hand; and the streaming property: any split of an output into deltas streams the same calls
// (name first, then argument text concatenating to the non-streamed arguments) and content.
#include "chat/tool_call_parser.h"

#include <map>
#include <random>

#include <gtest/gtest.h>

namespace radixserve::chat {
namespace {

std::vector<ToolSpec> Tools() {
  return {
      {"get_weather", Json::parse(R"({"type": "object", "properties": {
          "city": {"type": "string"}, "days": {"type": "integer"},
          "unit": {"type": "string", "enum": ["c", "f"]}}})")},
      {"search", Json::parse(R"({"type": "object", "properties": {
          "query": {"type": "string"}, "limit": {"type": "number"},
          "filters": {"type": "object"}, "exact": {"type": "boolean"}}})")},
  };
}

struct Case {
  std::string parser;
  std::string text;
  std::string normal;                                      // non-streamed content
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  std::string stream_normal = "<same>";                    // streamed content (stripped)
};

const std::string kDsCalls = "<｜tool▁calls▁begin｜>", kDsCallsEnd = "<｜tool▁calls▁end｜>",
                  kDsCall = "<｜tool▁call▁begin｜>", kDsEnd = "<｜tool▁call▁end｜>",
                  kDsSep = "<｜tool▁sep｜>";
const std::string kWeather = R"({"city": "Paris", "days": 3})";

std::vector<Case> Cases() {
  return {
      {"hermes", "No call here.", "No call here.", {}},
      {"hermes",
       "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
       "{\"city\":\"Paris\",\"days\":3}}\n</tool_call>",
       "Checking.",
       {{"get_weather", kWeather}}},
      {"hermes",
       "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>"
       "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"日本 \\\"x\\\"\", "
       "\"limit\": 2.50}}</tool_call>",
       "",
       {{"get_weather", R"({"city": "Oslo"})"},
        {"search", R"({"query": "日本 \"x\"", "limit": 2.5})"}}},
      {"hermes", "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>", "", {}},
      {"hermes", "<tool_call>{\"name\": \"get_weather\"}</tool_call>", "", {{"get_weather", "{}"}}},
      {"qwen25",
       "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
       "\"days\": 3}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"exact\": true}}\n</tool_call>",
       "Sure.",
       {{"get_weather", kWeather}, {"search", R"({"exact": true})"}}},
      {"qwen",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",
       "",
       {{"get_weather", "{}"}}},
      {"llama3",
       "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": "
       "3}}",
       "",
       {{"get_weather", kWeather}}},
      {"llama3",
       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 3}}; "
       "{\"name\": \"search\", \"parameters\": {\"query\": \"q\"}}",
       "",
       {{"get_weather", kWeather}, {"search", R"({"query": "q"})"}}},
      {"llama3", "Just text.", "Just text.", {}},
      {"mistral",
       "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
       "3}}, "
       "{\"name\": \"search\", \"arguments\": {\"filters\": {\"a\": [1, 2]}}}]",
       "",
       {{"get_weather", kWeather}, {"search", R"({"filters": {"a": [1, 2]}})"}}},
      {"mistral",
       "Let me see. [TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\", \"days\": 3}",
       "Let me see.",
       {{"get_weather", kWeather}}},
      {"pythonic",
       "[get_weather(city=\"Paris\", days=3), search(query='a b', limit=2.5, exact=True, "
       "filters={'k': [1, None]})]",
       "",
       {{"get_weather", kWeather},
        {"search",
         R"({"query": "a b", "limit": 2.5, "exact": true, "filters": {"k": [1, null]}})"}}},
      {"pythonic",
       "<|python_start|>[get_weather(city=\"Rome\")]<|python_end|>",
       "",
       {{"get_weather", R"({"city": "Rome"})"}}},
      {"pythonic", "Nothing to call [1, 2].", "Nothing to call [1, 2].", {}},
      {"deepseekv3",
       "Sure." + kDsCalls + kDsCall + "function" + kDsSep +
           "get_weather\n```json\n{\"city\":\"Paris\",\"days\":3}\n```" + kDsEnd + "\n" + kDsCall +
           "function" + kDsSep + "search\n```json\n{\"query\": \"x\"}\n```" + kDsEnd + kDsCallsEnd,
       "Sure.",
       {{"get_weather", kWeather}, {"search", R"({"query": "x"})"}}},
      {"deepseekv31",
       kDsCalls + kDsCall + "get_weather" + kDsSep + "{\"city\": \"Paris\", \"days\": 3}" + kDsEnd +
           kDsCall + "search" + kDsSep + "{\"limit\": 1e2}" + kDsEnd + kDsCallsEnd,
       "",
       {{"get_weather", kWeather}, {"search", R"({"limit": 100.0})"}}},
      {"kimi_k2",
       "Calling.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
       "<|tool_call_argument_begin|>{\"city\":\"Paris\",\"days\":3}<|tool_call_end|>"
       "<|tool_calls_section_end|>",
       "Calling.",
       {{"get_weather", R"({"city":"Paris","days":3})"}}},
      {"kimi_k2",
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.search:3"
       "<|tool_call_argument_begin|> {\"query\": \"a}b\"} "
       "<|tool_call_end|><|tool_calls_section_end|>",
       "",
       {{"search", R"({"query": "a}b"})"}}},
      {"gpt-oss",
       "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
       "<|message|>{\"city\":\"Paris\",\"days\":3}<|call|>",
       "",
       {{"get_weather", kWeather}}},
      {"gpt-oss",
       "<|start|>assistant<|channel|>commentary<|message|>Let me search.<|end|>"
       "<|start|>assistant<|channel|>commentary to=functions.search <|constrain|>json"
       "<|message|>{}<|call|>",
       "Let me search.",
       {{"search", "{}"}}},
      {"qwen3_coder",
       "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
       "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
       "Checking.\n",
       {{"get_weather", kWeather}},
       "Checking."},
      {"qwen3_coder",
       "<tool_call>\n<function=search>\n<parameter=query>\nline1\nline2\n</parameter>\n"
       "<parameter=limit>\n5\n</parameter>\n<parameter=filters>\n{\"a\": [1]}\n</parameter>\n"
       "<parameter=exact>\nTRUE\n</parameter>\n<parameter=extra>\nnull\n</parameter>\n</"
       "function>\n</tool_call>",
       "",
       {{"search",
         R"({"query": "line1\nline2", "limit": 5, "filters": {"a": [1]}, "exact": true, "extra": null})"}}},
      {"glm45",
       "Let me "
       "check.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>北京</arg_value>\n"
       "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
       "Let me check.",
       {{"get_weather", R"({"city": "北京", "days": 3})"}}},
      {"glm",
       "<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>123</arg_value>\n"
       "<arg_key>filters</arg_key>\n<arg_value>{\"k\": 1}</arg_value>\n</tool_call>",
       "",
       {{"search", R"({"query": "123", "filters": {"k": 1}})"}}},
      {"step3",
       "Ok.<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke "
       "name=\"get_weather\">"
       "<steptml:parameter name=\"city\">Paris</steptml:parameter><steptml:parameter "
       "name=\"days\">3"
       "</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>",
       "Ok.",
       {{"get_weather", kWeather}}},
  };
}

struct Streamed {
  std::string normal;
  std::vector<std::pair<std::string, std::string>> calls;
};

// Feeds `chunks`, checking that each call's first delta carries its name and later ones do not.
Streamed Stream(const ToolCallParser& parser, const std::vector<std::string>& chunks) {
  ToolCallStream stream = parser.NewStream();
  Streamed out;
  auto take = [&](const ToolCallStreamResult& r) {
    out.normal += r.normal_text;
    for (const auto& d : r.calls) {
      if (static_cast<size_t>(d.index) == out.calls.size()) {
        EXPECT_TRUE(d.name.has_value()) << "first delta of call " << d.index << " has no name";
        out.calls.emplace_back(d.name.value_or(""), "");
      } else {
        EXPECT_LT(static_cast<size_t>(d.index), out.calls.size());
        EXPECT_FALSE(d.name.has_value());
      }
      out.calls[static_cast<size_t>(d.index)].second += d.arguments;
    }
  };
  for (const auto& c : chunks) take(stream.Feed(c));
  take(stream.Finish());
  return out;
}

// Splits at UTF-8 character boundaries into pieces of 1..max_chars characters.
std::vector<std::string> Split(const std::string& text, std::mt19937& rng, size_t max_chars) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) starts.push_back(i);
  }
  starts.push_back(text.size());
  std::vector<std::string> chunks;
  std::uniform_int_distribution<size_t> len(1, max_chars);
  for (size_t k = 0; k + 1 < starts.size();) {
    size_t next = std::min(starts.size() - 1, k + len(rng));
    chunks.push_back(text.substr(starts[k], starts[next] - starts[k]));
    k = next;
  }
  return chunks;
}

std::string Strip(const std::string& s) {
  size_t a = s.find_first_not_of(" \n\t");
  return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(" \n\t") - a + 1);
}

class ToolCallParserCase : public ::testing::TestWithParam<size_t> {};

TEST_P(ToolCallParserCase, ParsesAsDocumentedAndStreamsTheSameInEverySplit) {
  Case c = Cases()[GetParam()];
  auto parser = ToolCallParser::Create(c.parser, Tools());
  ASSERT_TRUE(parser.ok()) << parser.status().message();
  ToolCallParseResult parsed = (*parser)->Parse(c.text);
  EXPECT_EQ(parsed.normal_text, c.normal) << c.parser << ": " << c.text;
  std::vector<std::pair<std::string, std::string>> calls;
  for (const auto& call : parsed.calls) calls.emplace_back(call.name, call.arguments);
  EXPECT_EQ(calls, c.calls) << c.parser << ": " << c.text;

  std::string expected_stream_normal =
      c.stream_normal == "<same>" ? Strip(c.normal) : c.stream_normal;
  Streamed whole = Stream(**parser, {c.text});
  EXPECT_EQ(whole.calls, c.calls) << "one delta";
  EXPECT_EQ(Strip(whole.normal), expected_stream_normal) << "one delta";
  std::mt19937 rng(1234 + static_cast<unsigned>(GetParam()));
  for (size_t max_chars : {size_t(1), size_t(2), size_t(5), size_t(17)}) {
    for (int trial = 0; trial < (max_chars == 1 ? 1 : 6); ++trial) {
      auto chunks = Split(c.text, rng, max_chars);
      Streamed s = Stream(**parser, chunks);
      ASSERT_EQ(s.calls, c.calls) << "pieces of up to " << max_chars << " chars";
      ASSERT_EQ(s.normal, whole.normal) << "pieces of up to " << max_chars << " chars";
    }
  }
}

// Long content around the calls, with marker-like fragments and a stray closing tag: the stream
// settles what is final as it goes, so it keeps only a short tail of the text, and every split
// still streams what one delta streams.
TEST_P(ToolCallParserCase, LongContentIsSettledAndStreamsTheSame) {
  Case c = Cases()[GetParam()];
  auto parser = ToolCallParser::Create(c.parser, Tools());
  ASSERT_TRUE(parser.ok()) << parser.status().message();
  std::string prose;
  for (int i = 0; prose.size() < 4000; ++i) {
    prose += "Line " + std::to_string(i) +
             ": a <tool_ b [TOOL c <｜tool d <|python e ` f } g </tool_call> h <function i\n";
  }
  const std::string text = prose + c.text + prose;
  Streamed whole = Stream(**parser, {text});
  std::mt19937 rng(77 + static_cast<unsigned>(GetParam()));
  for (size_t max_chars : {size_t(1), size_t(9)}) {
    ToolCallStream stream = (*parser)->NewStream();
    size_t most_buffered = 0;
    for (const std::string& chunk : Split(prose, rng, max_chars)) {
      stream.Feed(chunk);
      most_buffered = std::max(most_buffered, stream.buffered());
    }
    EXPECT_LT(most_buffered, 200u) << c.parser << " kept " << most_buffered;
    Streamed s = Stream(**parser, Split(text, rng, max_chars));
    EXPECT_EQ(s.calls, whole.calls) << c.parser << ", pieces of up to " << max_chars;
    EXPECT_EQ(s.normal, whole.normal) << c.parser << ", pieces of up to " << max_chars;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, ToolCallParserCase, ::testing::Range(size_t(0), Cases().size()));

TEST(ToolCallParserTest, UnknownNameListsTheValidOnes) {
  auto parser = ToolCallParser::Create("hermes2", Tools());
  ASSERT_FALSE(parser.ok());
  EXPECT_NE(parser.status().message().find("hermes, kimi_k2"), std::string::npos)
      << parser.status().message();
  for (const char* name :
       {"hermes", "qwen25", "qwen", "qwen3_coder", "llama3", "mistral", "pythonic", "deepseekv3",
        "deepseekv31", "kimi_k2", "gpt-oss", "glm45", "glm", "step3"}) {
    EXPECT_TRUE(ToolCallParser::Create(name, Tools()).ok()) << name;
  }
}

TEST(ToolCallParserTest, WithoutToolsTheTextIsContent) {
  auto parser = ToolCallParser::Create("hermes", {});
  ASSERT_TRUE(parser.ok());
  std::string text = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>";
  EXPECT_EQ((*parser)->Parse(text).normal_text, text);
  EXPECT_FALSE((*parser)->HasToolCall(text));
  ToolCallStream stream = (*parser)->NewStream();
  EXPECT_EQ(stream.Feed(text).normal_text, text);
}

TEST(ToolCallParserTest, HoldsBackPartialMarkersAndReleasesThemAtTheEnd) {
  auto parser = ToolCallParser::Create("hermes", Tools());
  ASSERT_TRUE(parser.ok());
  ToolCallStream stream = (*parser)->NewStream();
  EXPECT_EQ(stream.Feed("Hello <tool").normal_text, "Hello ");
  EXPECT_EQ(stream.Finish().normal_text, "<tool");
}

TEST(ToolCallParserTest, ArgumentsStreamBeforeTheCallCloses) {
  auto parser = ToolCallParser::Create("qwen25", Tools());
  ASSERT_TRUE(parser.ok());
  ToolCallStream stream = (*parser)->NewStream();
  auto r = stream.Feed("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[1].arguments, "{\"city\": \"Par");
}

TEST(ToolCallParserTest, StructureInfoForGrammars) {
  auto hermes = ToolCallParser::Create("hermes", Tools());
  auto info = (*hermes)->StructureInfo("get_weather");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->begin, "<tool_call>{\"name\":\"get_weather\", \"arguments\":");
  EXPECT_EQ(info->end, "}</tool_call>");
  EXPECT_EQ(info->trigger, "<tool_call>");
  auto kimi = ToolCallParser::Create("kimi_k2", Tools());
  EXPECT_EQ((*kimi)->StructureInfo("f")->trigger, "<|tool_calls_section_begin|>");
  auto pythonic = ToolCallParser::Create("pythonic", Tools());
  EXPECT_FALSE((*pythonic)->StructureInfo("f").has_value());
}

TEST(ToolCallParserTest, ToolSpecsFromOpenAI) {
  auto specs = ToolSpecsFromOpenAI(Json::parse(R"([{"type": "function", "function":
      {"name": "f", "parameters": {"type": "object"}}}])"));
  ASSERT_TRUE(specs.ok());
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].name, "f");
  EXPECT_FALSE(ToolSpecsFromOpenAI(Json::parse(R"([{"type": "function", "function": {}}])")).ok());
}

}  // namespace
}  // namespace radixserve::chat

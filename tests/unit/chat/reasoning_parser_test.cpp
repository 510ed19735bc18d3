// ReasoningParser: each --reasoning-parser format on outputs written from SGLang's documented
// layouts (reasoning_parser.py docstrings, test_reasoning_parser.py cases), expected results by
// hand; streamed deltas in any split concatenate to the non-streamed result.
#include "chat/reasoning_parser.h"

#include <random>

#include <gtest/gtest.h>

namespace radixserve::chat {
namespace {

struct Case {
  std::string parser;
  std::optional<bool> force;
  std::string text;
  std::string reasoning;
  std::string normal;
  bool stream_reasoning = true;
};

std::vector<Case> Cases() {
  return {
      {"deepseek-r1", std::nullopt, "I need to think.</think>The answer is 42.", "I need to think.",
       "The answer is 42."},
      {"deepseek-r1", false, "<think>Think.</think>\n\nAnswer.", "Think.", "\n\nAnswer."},
      {"deepseek-r1", std::nullopt, "Truncated while thinking", "Truncated while thinking", ""},
      {"qwen3", false, "<think>Let me see.</think>Paris.", "Let me see.", "Paris."},
      {"qwen3", false, "No thinking.", "", "No thinking."},
      {"qwen3", true, "<think>plan</think>done", "plan", "done"},
      {"qwen3", true, "plan <tool_call>\n{}\n</tool_call>", "plan ",
       "<tool_call>\n{}\n</tool_call>"},
      {"qwen3-thinking", false, "thinking</think>final", "thinking", "final"},
      {"minimax", std::nullopt, "thinking</think>final", "thinking", "final"},
      {"step3", std::nullopt, "t</think>a", "t", "a"},
      {"kimi", true, "◁think▷thinking◁/think▷answer", "thinking", "answer"},
      {"kimi", true, "plain answer", "", "plain answer"},
      {"kimi_k2", false, "<think>plan<|tool_calls_section_begin|>x", "plan",
       "<|tool_calls_section_begin|>x"},
      {"glm45", false, "<think>a</think>b", "a", "b"},
      {"deepseek-v3", true, "<think>t</think>a", "t", "a"},
      {"minimax-append-think", std::nullopt, "thinking</think>final", "",
       "<think>thinking</think>final"},
      {"qwen3", true, "<think>hidden until the end</think>shown", "hidden until the end", "shown",
       false},
      {"gpt-oss", std::nullopt,
       "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>final"
       "<|message|>It is sunny.<|return|>",
       "Need the weather.", "It is sunny."},
      {"gpt-oss", std::nullopt,
       "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.f <|constrain|>json<|message|>{}<|call|>",
       "Think.",
       "<|start|>assistant<|channel|>commentary to=functions.f "
       "<|constrain|>json<|message|>{}<|call|>"},
      // Harmony decoded with its special tokens skipped (SGLang's text fallback).
      {"gpt-oss", std::nullopt, "analysisThe user asks. Easy. assistantfinal The answer is 4.",
       "The user asks. Easy.", "The answer is 4."},
      {"gpt-oss", std::nullopt, "AssistantAnalysis thinking a", " thinking a", ""},
      {"gpt-oss", std::nullopt, "commentary  Checking.  assistantfinalDone.", "", "Checking.Done."},
      {"gpt-oss", std::nullopt, "commentary  Still checking  ", "", "Still checking"},
      {"gpt-oss", std::nullopt, "assistantfinal", "", ""},
      {"gpt-oss", std::nullopt, "analysis", "", ""},
      {"gpt-oss", std::nullopt, "ana", "", "ana"},
      {"gpt-oss", std::nullopt, "assistant: hello", "", "assistant: hello"},
      {"gpt-oss", std::nullopt, "An analysis of it.", "", "An analysis of it."},
  };
}

class ReasoningParserCase : public ::testing::TestWithParam<size_t> {};

TEST_P(ReasoningParserCase, ParsesAsDocumentedAndStreamsTheSame) {
  Case c = Cases()[GetParam()];
  ReasoningParserOptions options;
  options.force_reasoning = c.force;
  options.stream_reasoning = c.stream_reasoning;
  auto parser = ReasoningParser::Create(c.parser, options);
  ASSERT_TRUE(parser.ok()) << parser.status().message();
  ReasoningResult parsed = (*parser)->Parse(c.text);
  EXPECT_EQ(parsed.reasoning_text, c.reasoning) << c.parser << ": " << c.text;
  EXPECT_EQ(parsed.normal_text, c.normal) << c.parser << ": " << c.text;

  std::mt19937 rng(99 + static_cast<unsigned>(GetParam()));
  for (size_t max_bytes : {size_t(0), size_t(1), size_t(3), size_t(8)}) {
    for (int trial = 0; trial < (max_bytes <= 1 ? 1 : 6); ++trial) {
      ReasoningStream stream = (*parser)->NewStream();
      std::string reasoning, normal;
      auto take = [&](const ReasoningResult& r) {
        reasoning += r.reasoning_text;
        normal += r.normal_text;
        if (!c.stream_reasoning && !r.reasoning_text.empty()) {
          EXPECT_EQ(r.reasoning_text, c.reasoning) << "not streamed: one piece";
        }
      };
      std::uniform_int_distribution<size_t> len(1, std::max<size_t>(1, max_bytes));
      for (size_t pos = 0; pos < c.text.size();) {
        size_t n = max_bytes == 0 ? c.text.size() : len(rng);
        // Keep UTF-8 characters whole, as detokenized text arrives.
        while (pos + n < c.text.size() &&
               (static_cast<unsigned char>(c.text[pos + n]) & 0xC0) == 0x80)
          ++n;
        take(stream.Feed(c.text.substr(pos, n)));
        pos += n;
      }
      take(stream.Finish());
      ASSERT_EQ(reasoning, c.reasoning) << "pieces of up to " << max_bytes;
      ASSERT_EQ(normal, c.normal) << "pieces of up to " << max_bytes;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, ReasoningParserCase, ::testing::Range(size_t(0), Cases().size()));

TEST(ReasoningParserTest, UnknownNameListsTheValidOnes) {
  auto parser = ReasoningParser::Create("deepseek-r2");
  ASSERT_FALSE(parser.ok());
  EXPECT_NE(parser.status().message().find("deepseek-r1, deepseek-v3"), std::string::npos)
      << parser.status().message();
  EXPECT_TRUE(ReasoningParser::Create("Qwen3").ok());  // case-insensitive, as in SGLang
}

TEST(ReasoningParserTest, RequestDecidesThinkingPerParser) {
  Json none = Json::object();
  Json off = Json::parse(R"({"enable_thinking": false})");
  Json on = Json::parse(R"({"thinking": true})");
  EXPECT_TRUE(ReasoningEnabledByRequest("deepseek-r1", off));
  EXPECT_TRUE(ReasoningEnabledByRequest("qwen3", none));
  EXPECT_FALSE(ReasoningEnabledByRequest("qwen3", off));
  EXPECT_FALSE(ReasoningEnabledByRequest("deepseek-v3", none));
  EXPECT_TRUE(ReasoningEnabledByRequest("deepseek-v3", on));
  EXPECT_TRUE(ReasoningEnabledByRequest("kimi_k2", off));
  EXPECT_FALSE(ReasoningEnabledByRequest("nonexistent", none));
}

TEST(ReasoningParserTest, PartialEndTokenIsHeldBack) {
  auto parser = ReasoningParser::Create("deepseek-r1");
  ReasoningStream stream = (*parser)->NewStream();
  EXPECT_EQ(stream.Feed("abc</th").reasoning_text, "abc");
  auto r = stream.Feed("ink>x");
  EXPECT_EQ(r.reasoning_text, "");
  EXPECT_EQ(r.normal_text, "x");
}

}  // namespace
}  // namespace radixserve::chat

namespace radixserve::chat {
namespace {

// Long thinking and a long answer, with partial markers inside: the stream settles as it goes
// (keeping only a short tail), and any split streams what one delta does.
TEST(ReasoningParserTest, LongOutputsAreSettledAndStreamTheSame) {
  std::string filler;
  for (int i = 0; filler.size() < 6000; ++i) {
    filler += "step " + std::to_string(i) + ": <thi </thin <tool_ca ◁/thi <|en <|chan\n";
  }
  for (const char* name : {"deepseek-r1", "qwen3", "kimi", "minimax-append-think", "gpt-oss"}) {
    for (bool forced : {false, true}) {
      ReasoningParserOptions options;
      options.force_reasoning = forced;
      auto parser = ReasoningParser::Create(name, options);
      ASSERT_TRUE(parser.ok());
      const ReasoningFormat& f = (*parser)->format();
      const std::string text = std::string(name) == "gpt-oss"
                                   ? "<|channel|>analysis<|message|>" + filler +
                                         "<|end|><|start|>assistant<|channel|>final<|message|>" +
                                         filler + "<|return|>"
                                   : f.think_start + filler + f.think_end + filler;
      ReasoningResult parsed = (*parser)->Parse(text);
      std::mt19937 rng(5);
      std::uniform_int_distribution<size_t> len(1, 7);
      ReasoningStream stream = (*parser)->NewStream();
      std::string reasoning, normal;
      size_t most_buffered = 0;
      for (size_t pos = 0; pos < text.size();) {
        size_t n = len(rng);
        while (pos + n < text.size() && (static_cast<unsigned char>(text[pos + n]) & 0xC0) == 0x80)
          ++n;
        ReasoningResult r = stream.Feed(text.substr(pos, n));
        reasoning += r.reasoning_text;
        normal += r.normal_text;
        most_buffered = std::max(most_buffered, stream.buffered());
        pos += n;
      }
      ReasoningResult r = stream.Finish();
      reasoning += r.reasoning_text;
      normal += r.normal_text;
      EXPECT_EQ(reasoning, parsed.reasoning_text) << name << " forced=" << forced;
      EXPECT_EQ(normal, parsed.normal_text) << name << " forced=" << forced;
      EXPECT_LT(most_buffered, 64u) << name << " forced=" << forced;
    }
  }
}

}  // namespace
}  // namespace radixserve::chat

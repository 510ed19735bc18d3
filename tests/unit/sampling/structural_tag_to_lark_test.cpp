// Structural tags: free text with triggered JSON sections. Outputs of random walks (with the
// trigger text fed in to enter a section) are checked by a hand-written splitter: every trigger is
// followed by a known begin, a JSON document that nlohmann parses and that has the schema's
// required key with the right type, then the end; no other text contains a trigger.
#include "sampling/structural_tag_to_lark.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "grammar_test_util.h"

namespace radixserve::sampling {
namespace {

constexpr const char* kTag = R"({
  "type": "structural_tag",
  "structures": [
    {"begin": "<f=get>", "schema": {"type": "object", "properties": {"city": {"type": "string",
       "maxLength": 6}}, "required": ["city"], "additionalProperties": false}, "end": "</f>"},
    {"begin": "<f=sum>", "schema": {"type": "object", "properties": {"n": {"type": "integer",
       "minimum": 0, "maximum": 99}}, "required": ["n"], "additionalProperties": false},
     "end": "</f>"}],
  "triggers": ["<f="]
})";

// Checks `text` against kTag by hand; returns the number of sections found.
int CheckTagged(const std::string& text) {
  int sections = 0;
  size_t pos = 0;
  while (true) {
    const size_t at = text.find("<f=", pos);
    if (at == std::string::npos) break;
    const std::string rest = text.substr(at);
    const bool get = rest.rfind("<f=get>", 0) == 0;
    const bool sum = rest.rfind("<f=sum>", 0) == 0;
    EXPECT_TRUE(get || sum) << text;
    if (!get && !sum) return sections;
    const size_t json_start = at + 7;
    const size_t end = text.find("</f>", json_start);
    EXPECT_NE(end, std::string::npos) << "unterminated section: " << text;
    if (end == std::string::npos) return sections;
    const auto doc =
        nlohmann::json::parse(text.substr(json_start, end - json_start), nullptr, false);
    EXPECT_TRUE(doc.is_object()) << text;
    if (get) {
      EXPECT_TRUE(doc.contains("city") && doc["city"].is_string()) << text;
    } else {
      EXPECT_TRUE(doc.contains("n") && doc["n"].is_number_integer()) << text;
    }
    EXPECT_EQ(doc.size(), 1u) << text;
    ++sections;
    pos = end + 4;
  }
  return sections;
}

TEST(StructuralTagToLarkTest, FreeTextWithTriggeredSections) {
  for (const test::GrammarVocab* vocab : {&test::Stories(), test::SmolLM2()}) {
    if (vocab == nullptr) continue;
    auto compiled = test::MustCompile(*vocab, GrammarKind::kStructuralTag, kTag);
    ASSERT_NE(compiled, nullptr);
    GrammarVocabulary fragments = GrammarVocabularyFromTokenizer(
        *vocab->tokenizer, vocab->grammar->vocab_size(), vocab->tokenizer->eos_ids());
    int total_sections = 0;
    for (uint32_t seed = 0; seed < 12; ++seed) {
      GrammarMatcher matcher = compiled->NewMatcher();
      std::vector<int32_t> ids;
      // Free text, then the trigger (fed as text tokens), then a walk that must close the section.
      auto free = test::RandomWalk(*vocab, matcher, seed, 8, 0.0);
      ids = free.ids;
      if (matcher.IsTerminated()) continue;
      // The walk may stop inside a UTF-8 character, where the trigger cannot follow.
      const auto trigger = fragments.tokenize("<f=");
      if (*matcher.ValidateTokens(trigger) != trigger.size()) continue;
      ASSERT_TRUE(matcher.AcceptTokens(trigger).ok());
      ids.insert(ids.end(), trigger.begin(), trigger.end());
      auto section = test::RandomWalk(*vocab, matcher, seed + 100, 400, 0.5, 0.5);
      ASSERT_TRUE(section.ended) << test::Detokenize(*vocab, ids);
      ids.insert(ids.end(), section.ids.begin(), section.ids.end());
      total_sections += CheckTagged(test::Detokenize(*vocab, ids));
    }
    EXPECT_GE(total_sections, 8);
  }
}

TEST(StructuralTagToLarkTest, TriggerMustStartAKnownStructure) {
  const auto& vocab = test::Stories();
  auto compiled = test::MustCompile(vocab, GrammarKind::kStructuralTag, kTag);
  GrammarVocabulary fragments = GrammarVocabularyFromTokenizer(
      *vocab.tokenizer, vocab.grammar->vocab_size(), vocab.tokenizer->eos_ids());
  GrammarMatcher matcher = compiled->NewMatcher();
  const auto good = fragments.tokenize("hello <f=sum>{\"n\": 42}</f> bye");
  auto n = matcher.ValidateTokens(good);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, good.size());
  const auto bad = fragments.tokenize("hello <f=put>");
  n = matcher.ValidateTokens(bad);
  ASSERT_TRUE(n.ok());
  EXPECT_LT(*n, bad.size());
}

TEST(StructuralTagToLarkTest, Errors) {
  for (const char* bad :
       {"[]", R"({"structures": [], "triggers": ["<f="]})",
        R"({"structures": [{"begin": "<g>", "schema": {}, "end": "</g>"}], "triggers": ["<f="]})",
        R"({"structures": [{"begin": "<f=a>", "end": "</f>"}], "triggers": ["<f="]})",
        R"({"structures": [{"begin": "<f=a>", "schema": {}, "end": "</f>"}], "triggers": [""]})",
        R"({"type": "structural_tag", "format": {"type": "triggered_tags"}})"}) {
    auto lark = ConvertStructuralTagToLark(bad, true, "");
    EXPECT_FALSE(lark.ok()) << bad;
    if (!lark.ok()) {
      EXPECT_EQ(lark.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace radixserve::sampling

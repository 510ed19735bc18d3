// GrammarMatcher driven by random tokens drawn only from its masks, on real vocabularies. Every
// finished output is checked by an independent validator: std::regex (ECMAScript, on patterns
// whose meaning is the same in Rust's regex syntax) for regexes, nlohmann::json plus hand-written
// checks of the schema's properties for JSON schemas.
#include "sampling/grammar_matcher.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include "../test_reference.h"

#include <regex>

#include "grammar_test_util.h"
#include "sampling/logits_processor.h"
#include "sampling/sampler.h"

namespace radixserve::sampling {
namespace {

using test::AllowedTokens;
using test::Detokenize;
using test::GrammarVocab;
using test::MustCompile;
using test::RandomWalk;

constexpr int kWalks = 25;

void CheckRegexWalks(const GrammarVocab& vocab, const std::string& pattern) {
  auto compiled = MustCompile(vocab, GrammarKind::kRegex, pattern);
  ASSERT_NE(compiled, nullptr);
  const std::regex reference(pattern);
  for (uint32_t seed = 0; seed < kWalks; ++seed) {
    GrammarMatcher matcher = compiled->NewMatcher();
    const auto walk = RandomWalk(vocab, matcher, seed, 200);
    ASSERT_TRUE(walk.ended) << pattern << " seed " << seed;
    const std::string text = Detokenize(vocab, walk.ids);
    EXPECT_TRUE(std::regex_match(text, reference)) << pattern << " produced '" << text << "'";
  }
}

TEST(GrammarMatcherTest, RegexOutputsMatchStdRegex) {
  for (const char* pattern : {"[0-9]+", "[0-9]{3}-[0-9]{4}", "(cat|dog)s?( and (cat|dog)s?)*",
                              "[a-z]{1,8}@[a-z]{1,8}\\.(com|org)", "-?[0-9]+(\\.[0-9]+)?",
                              "(yes|no|maybe)", "[A-Z][a-z]{0,8}( [A-Z][a-z]{0,8}){0,3}"}) {
    CheckRegexWalks(test::Stories(), pattern);
  }
}

TEST(GrammarMatcherTest, RegexOutputsMatchStdRegexSmolLM2) {
  const GrammarVocab* smol = test::SmolLM2();
  if (smol == nullptr) {
    RADIX_SKIP_WITHOUT_REFERENCE("SmolLM2 not in the model cache (scripts/setup)");
  }
  for (const char* pattern : {"[0-9]{3}-[0-9]{4}", "(cat|dog)s?( and (cat|dog)s?)*",
                              "[a-z]{1,8}@[a-z]{1,8}\\.(com|org)", "\\{\"ok\": (true|false)\\}"}) {
    CheckRegexWalks(*smol, pattern);
  }
}

constexpr const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "role": {"enum": ["admin", "user", "guest"]},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]},
             "maxItems": 3},
    "active": {"type": "boolean"}
  },
  "required": ["name", "age", "role"],
  "additionalProperties": false
})";

size_t CountCodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The schema above, checked by hand.
void CheckPerson(const std::string& text) {
  const auto doc = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << "not JSON: " << text;
  ASSERT_TRUE(doc.is_object()) << text;
  for (const char* key : {"name", "age", "role"}) EXPECT_TRUE(doc.contains(key)) << text;
  for (const auto& [key, value] : doc.items()) {
    if (key == "name") {
      ASSERT_TRUE(value.is_string()) << text;
      EXPECT_LE(CountCodePoints(value.get<std::string>()), 12u) << text;
    } else if (key == "age") {
      ASSERT_TRUE(value.is_number_integer()) << text;
      EXPECT_GE(value.get<int64_t>(), 0) << text;
      EXPECT_LE(value.get<int64_t>(), 120) << text;
    } else if (key == "role") {
      ASSERT_TRUE(value.is_string()) << text;
      const std::string role = value.get<std::string>();
      EXPECT_TRUE(role == "admin" || role == "user" || role == "guest") << text;
    } else if (key == "tags") {
      ASSERT_TRUE(value.is_array()) << text;
      EXPECT_LE(value.size(), 3u) << text;
      for (const auto& tag : value) {
        ASSERT_TRUE(tag.is_string()) << text;
        EXPECT_TRUE(tag == "a" || tag == "b" || tag == "c") << text;
      }
    } else if (key == "active") {
      EXPECT_TRUE(value.is_boolean()) << text;
    } else {
      ADD_FAILURE() << "unexpected key " << key << " in " << text;
    }
  }
}

void CheckPersonWalks(const GrammarVocab& vocab, GrammarCompilerOptions options = {}) {
  auto compiled = MustCompile(vocab, GrammarKind::kJsonSchema, kPersonSchema, options);
  ASSERT_NE(compiled, nullptr);
  for (uint32_t seed = 0; seed < kWalks; ++seed) {
    GrammarMatcher matcher = compiled->NewMatcher();
    const auto walk = RandomWalk(vocab, matcher, seed, 600, 0.5, 0.5);
    ASSERT_TRUE(walk.ended) << "seed " << seed << ": " << Detokenize(vocab, walk.ids);
    CheckPerson(Detokenize(vocab, walk.ids));
  }
}

TEST(GrammarMatcherTest, JsonSchemaOutputsParseAndFollowTheSchema) {
  CheckPersonWalks(test::Stories());
}

TEST(GrammarMatcherTest, JsonSchemaOutputsParseAndFollowTheSchemaSmolLM2) {
  const GrammarVocab* smol = test::SmolLM2();
  if (smol == nullptr) {
    RADIX_SKIP_WITHOUT_REFERENCE("SmolLM2 not in the model cache (scripts/setup)");
  }
  CheckPersonWalks(*smol);
}

TEST(GrammarMatcherTest, MaskExcludesTokensThatBreakTheGrammar) {
  const GrammarVocab& vocab = test::Stories();
  auto compiled = MustCompile(vocab, GrammarKind::kRegex, "[0-9]+");
  GrammarMatcher matcher = compiled->NewMatcher();
  std::vector<uint32_t> mask(matcher.bitmask_words());
  ASSERT_TRUE(matcher.FillNextTokenBitmask(mask).ok());
  // Every allowed token decodes to digits only, and every single-digit token is allowed.
  for (int32_t t : AllowedTokens(mask, vocab.grammar->vocab_size())) {
    const std::string text = vocab.tokenizer->Decode(std::span(&t, 1));
    EXPECT_TRUE(!text.empty() && text.find_first_not_of("0123456789") == std::string::npos)
        << "token " << t << " '" << text << "'";
  }
  // Each digit as its byte-fallback token <0x30>..<0x39> (and as a piece where one exists).
  for (char digit = '0'; digit <= '9'; ++digit) {
    const auto fallback = vocab.tokenizer->TokenToId("<0x3" + std::string(1, digit) + ">");
    ASSERT_TRUE(fallback.has_value());
    EXPECT_TRUE(IsTokenAllowed(mask, *fallback)) << digit;
    if (const auto piece = vocab.tokenizer->TokenToId(std::string(1, digit))) {
      EXPECT_TRUE(IsTokenAllowed(mask, *piece)) << digit;
    }
  }
  const auto letter = vocab.tokenizer->TokenToId("a");
  ASSERT_TRUE(letter.has_value());
  EXPECT_FALSE(IsTokenAllowed(mask, *letter));
  // Accepting the disallowed letter is an error that sticks.
  EXPECT_FALSE(matcher.AcceptToken(*letter).ok());
  EXPECT_TRUE(matcher.IsError());
  EXPECT_TRUE(matcher.IsTerminated());
  EXPECT_FALSE(matcher.error().empty());
  EXPECT_FALSE(matcher.FillNextTokenBitmask(mask).ok());
}

TEST(GrammarMatcherTest, EosOnlyWhenAccepting) {
  const GrammarVocab& vocab = test::Stories();
  const int32_t eos = vocab.grammar->eos_ids().front();
  auto compiled = MustCompile(vocab, GrammarKind::kRegex, "ab[0-9]");
  GrammarMatcher matcher = compiled->NewMatcher();
  std::vector<uint32_t> mask(matcher.bitmask_words());
  // Pieces without SentencePiece's leading-space marker: the grammar wants no space.
  std::vector<int32_t> ids;
  for (const char* piece : {"a", "b", "4"}) ids.push_back(*vocab.tokenizer->TokenToId(piece));
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE(matcher.FillNextTokenBitmask(mask).ok());
    EXPECT_FALSE(IsTokenAllowed(mask, eos)) << "before token " << i;
    EXPECT_FALSE(matcher.IsAccepting());
    ASSERT_TRUE(matcher.AcceptToken(ids[i]).ok());
  }
  // Complete and not extensible: only EOS remains, and the matcher reports termination.
  ASSERT_TRUE(matcher.FillNextTokenBitmask(mask).ok());
  EXPECT_TRUE(matcher.IsAccepting());
  EXPECT_EQ(AllowedTokens(mask, vocab.grammar->vocab_size()), std::vector<int32_t>{eos});
  EXPECT_TRUE(matcher.IsTerminated());
  EXPECT_FALSE(matcher.IsError());
}

TEST(GrammarMatcherTest, EosAllowedWhileAcceptingButExtensible) {
  const GrammarVocab& vocab = test::Stories();
  const int32_t eos = vocab.grammar->eos_ids().front();
  auto compiled = MustCompile(vocab, GrammarKind::kRegex, "[0-9]+");
  GrammarMatcher matcher = compiled->NewMatcher();
  std::vector<uint32_t> mask(matcher.bitmask_words());
  ASSERT_TRUE(matcher.FillNextTokenBitmask(mask).ok());
  EXPECT_FALSE(IsTokenAllowed(mask, eos));
  ASSERT_TRUE(matcher.AcceptToken(*vocab.tokenizer->TokenToId("4")).ok());
  ASSERT_TRUE(matcher.FillNextTokenBitmask(mask).ok());
  EXPECT_TRUE(IsTokenAllowed(mask, eos));
  EXPECT_TRUE(IsTokenAllowed(mask, *vocab.tokenizer->TokenToId("2")));
  EXPECT_FALSE(matcher.IsTerminated());
  ASSERT_TRUE(matcher.AcceptToken(eos).ok());
  EXPECT_TRUE(matcher.IsTerminated());
  EXPECT_FALSE(matcher.IsError());
}

TEST(GrammarMatcherTest, RollbackRestoresEarlierMasks) {
  const GrammarVocab& vocab = test::Stories();
  auto compiled = MustCompile(vocab, GrammarKind::kRegex, "(ab|cd)[0-9]");
  GrammarMatcher matcher = compiled->NewMatcher();
  std::vector<uint32_t> start(matcher.bitmask_words()), mask(matcher.bitmask_words());
  ASSERT_TRUE(matcher.FillNextTokenBitmask(start).ok());
  const int32_t a = *vocab.tokenizer->TokenToId("a");
  const int32_t b = *vocab.tokenizer->TokenToId("b");
  const int32_t c = *vocab.tokenizer->TokenToId("c");
  ASSERT_TRUE(matcher.AcceptTokens(std::vector<int32_t>{a, b}).ok());
  ASSERT_TRUE(matcher.Rollback(2).ok());
  ASSERT_TRUE(matcher.FillNextTokenBitmask(mask).ok());
  EXPECT_EQ(mask, start);
  EXPECT_TRUE(matcher.AcceptToken(c).ok());
  EXPECT_FALSE(matcher.AcceptToken(b).ok());  // "cb" is not a prefix
}

TEST(GrammarMatcherTest, ResetAndValidateTokens) {
  const GrammarVocab& vocab = test::Stories();
  auto compiled = MustCompile(vocab, GrammarKind::kRegex, "ab[0-9]");
  GrammarMatcher matcher = compiled->NewMatcher();
  const std::vector<int32_t> ids = {*vocab.tokenizer->TokenToId("a"),
                                    *vocab.tokenizer->TokenToId("b"),
                                    *vocab.tokenizer->TokenToId("x")};
  auto valid = matcher.ValidateTokens(ids);
  ASSERT_TRUE(valid.ok());
  EXPECT_EQ(*valid, 2u);  // "ab" fits, "x" does not; the state is unchanged
  ASSERT_TRUE(matcher.AcceptToken(ids[0]).ok());
  ASSERT_TRUE(matcher.Reset().ok());
  EXPECT_FALSE(matcher.AcceptToken(ids[1]).ok());  // back at the start, "b" cannot begin
}

TEST(GrammarMatcherTest, ForcedTokensSpellTheForcedText) {
  const GrammarVocab* smol = test::SmolLM2();
  if (smol == nullptr) {
    RADIX_SKIP_WITHOUT_REFERENCE("SmolLM2 not in the model cache (scripts/setup)");
  }
  auto compiled = MustCompile(*smol, GrammarKind::kRegex, "The answer is (yes|no)");
  GrammarMatcher matcher = compiled->NewMatcher();
  auto forced = matcher.ForcedTokens();
  ASSERT_TRUE(forced.ok()) << forced.status().message();
  ASSERT_FALSE(forced->empty());
  const std::string text = smol->tokenizer->Decode(*forced);
  EXPECT_EQ(std::string("The answer is ").substr(0, text.size()), text);
  EXPECT_TRUE(matcher.AcceptTokens(*forced).ok());
}

TEST(GrammarMatcherTest, MatchersFromOneGrammarAreIndependent) {
  const GrammarVocab& vocab = test::Stories();
  auto compiled = MustCompile(vocab, GrammarKind::kRegex, "(ab|cd)");
  GrammarMatcher first = compiled->NewMatcher();
  GrammarMatcher second = compiled->NewMatcher();
  ASSERT_TRUE(first.AcceptToken(*vocab.tokenizer->TokenToId("a")).ok());
  EXPECT_TRUE(second.AcceptToken(*vocab.tokenizer->TokenToId("c")).ok());
  GrammarMatcher moved = std::move(first);
  EXPECT_TRUE(moved.AcceptToken(*vocab.tokenizer->TokenToId("b")).ok());
  EXPECT_TRUE(moved.IsAccepting());
}

// The mask reaches sampling through LogitsProcessor: greedy decoding of logits that favour a
// letter still picks a digit.
TEST(GrammarMatcherTest, LogitsProcessorAppliesTheMaskBeforeSampling) {
  const GrammarVocab& vocab = test::Stories();
  const int32_t n = vocab.grammar->vocab_size();
  auto compiled = MustCompile(vocab, GrammarKind::kRegex, "[0-9]+");
  GrammarMatcher matcher = compiled->NewMatcher();
  std::vector<uint32_t> mask(matcher.bitmask_words());
  ASSERT_TRUE(matcher.FillNextTokenBitmask(mask).ok());

  std::vector<float> logits(static_cast<size_t>(n), 0.0f);
  const int32_t letter = *vocab.tokenizer->TokenToId("a");
  const int32_t four = *vocab.tokenizer->TokenToId("4");
  logits[static_cast<size_t>(letter)] = 10.0f;
  logits[static_cast<size_t>(four)] = 1.0f;
  auto params = SamplingParams::FromJson({{"temperature", 0.0}});
  ASSERT_TRUE(params.ok());
  ASSERT_TRUE(params->Verify(n).ok());
  LogitsProcessor processor(n);
  LogitsRowContext row{&params.value(), {}, {}, mask};
  processor.ProcessRow(logits, row);
  EXPECT_TRUE(std::isinf(logits[static_cast<size_t>(letter)]));
  Sampler sampler(n);
  SampleOutput out;
  sampler.SampleRow(logits, SampleRowParams::From(*params, 0, 0), out);
  EXPECT_EQ(out.token_id, four);
}

}  // namespace
}  // namespace radixserve::sampling

// GrammarCompiler: invalid constraints are errors naming the problem, the JSON whitespace options
// change which tokens may follow '{', schema property order survives, and compilation runs on
// threads other than the caller's.
#include "sampling/grammar_compiler.h"

#include <gtest/gtest.h>

#include <thread>

#include "grammar_test_util.h"

namespace radixserve::sampling {
namespace {

using test::GrammarVocab;

Status CompileError(GrammarKind kind, const std::string& text) {
  GrammarCompiler compiler(*test::Stories().grammar, {});
  auto compiled = compiler.Compile({kind, text});
  return compiled.ok() ? Status::Ok() : compiled.status();
}

void ExpectInvalid(GrammarKind kind, const std::string& text, const std::string& mentions) {
  const Status status = CompileError(kind, text);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << text;
  EXPECT_NE(status.message().find(mentions), std::string::npos)
      << text << " -> " << status.message();
}

TEST(GrammarCompilerTest, InvalidConstraintsAreErrors) {
  ExpectInvalid(GrammarKind::kJsonSchema, "{\"type\": ", "json_schema");
  ExpectInvalid(GrammarKind::kJsonSchema, R"({"type": "strin"})", "json_schema");
  ExpectInvalid(GrammarKind::kJsonSchema, R"({"$ref": "#/$defs/missing"})", "json_schema");
  ExpectInvalid(GrammarKind::kJsonSchema, R"({"type": "integer", "minimum": 5, "maximum": 1})",
                "json_schema");
  ExpectInvalid(GrammarKind::kRegex, "[0-9", "regex");
  ExpectInvalid(GrammarKind::kRegex, "(?<=a)b", "regex");
  ExpectInvalid(GrammarKind::kEbnf, "rot ::= \"a\"", "root");
  ExpectInvalid(GrammarKind::kEbnf, "root ::= item", "item");
  ExpectInvalid(GrammarKind::kLark, "start: undefined_rule", "lark");
  ExpectInvalid(GrammarKind::kRegex, std::string("a\0b", 3), "NUL");
}

TEST(GrammarCompilerTest, ValidConstraintsCompile) {
  EXPECT_TRUE(CompileError(GrammarKind::kJsonSchema, R"({"type": "object"})").ok());
  EXPECT_TRUE(CompileError(GrammarKind::kJsonSchema, "true").ok());
  EXPECT_TRUE(CompileError(GrammarKind::kRegex, "[a-z]+").ok());
  EXPECT_TRUE(CompileError(GrammarKind::kEbnf, "root ::= [a-z]+").ok());
  EXPECT_TRUE(CompileError(GrammarKind::kLark, "start: /[a-z]+/").ok());
}

// The first token of an object after '{' (a piece, or its byte-fallback token).
int32_t TokenFor(const GrammarVocab& vocab, char c) {
  if (auto id = vocab.tokenizer->TokenToId(std::string(1, c))) return *id;
  char name[8];
  std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<unsigned char>(c));
  return *vocab.tokenizer->TokenToId(name);
}

// Which of space / newline may follow '{' for a schema under `options`.
std::pair<bool, bool> WhitespaceAfterBrace(const GrammarCompilerOptions& options,
                                           const std::string& schema = R"({"type": "object"})") {
  const GrammarVocab& vocab = test::Stories();
  auto compiled = test::MustCompile(vocab, GrammarKind::kJsonSchema, schema, options);
  GrammarMatcher matcher = compiled->NewMatcher();
  EXPECT_TRUE(matcher.AcceptToken(TokenFor(vocab, '{')).ok());
  std::vector<uint32_t> mask(matcher.bitmask_words());
  EXPECT_TRUE(matcher.FillNextTokenBitmask(mask).ok());
  const int32_t space = *vocab.tokenizer->TokenToId("\xE2\x96\x81");  // "▁"
  return {IsTokenAllowed(mask, space), IsTokenAllowed(mask, TokenFor(vocab, '\n'))};
}

GrammarCompilerOptions Compact() {
  GrammarCompilerOptions options;
  options.json_any_whitespace = false;
  return options;
}

GrammarCompilerOptions WhitespacePattern(std::string pattern) {
  GrammarCompilerOptions options;
  options.json_whitespace_pattern = std::move(pattern);
  return options;
}

TEST(GrammarCompilerTest, JsonWhitespaceOptions) {
  EXPECT_EQ(WhitespaceAfterBrace({}), std::make_pair(true, true));
  EXPECT_EQ(WhitespaceAfterBrace(Compact()), std::make_pair(false, false));
  EXPECT_EQ(WhitespaceAfterBrace(WhitespacePattern("\\n*")), std::make_pair(false, true));
  // The schema's own x-guidance options win over the server's.
  EXPECT_EQ(WhitespaceAfterBrace(
                Compact(), R"({"type": "object", "x-guidance": {"whitespace_flexible": true}})"),
            std::make_pair(true, true));
}

TEST(GrammarCompilerTest, PropertyOrderFollowsTheSchema) {
  const GrammarVocab& vocab = test::Stories();
  const std::string schema = R"({"type": "object", "properties": {
      "zeta": {"type": "boolean"}, "alpha": {"type": "boolean"}},
      "required": ["zeta", "alpha"], "additionalProperties": false})";
  auto compiled = test::MustCompile(vocab, GrammarKind::kJsonSchema, schema, Compact());
  GrammarMatcher matcher = compiled->NewMatcher();
  const auto walk = test::RandomWalk(vocab, matcher, 7, 100, 1.0);
  ASSERT_TRUE(walk.ended);
  const std::string text = test::Detokenize(vocab, walk.ids);
  EXPECT_EQ(text.rfind("{\"zeta\":", 0), 0u) << text;
}

TEST(GrammarCompilerTest, EbnfSourceIsTheConvertedLark) {
  const GrammarVocab& vocab = test::Stories();
  auto compiled =
      test::MustCompile(vocab, GrammarKind::kEbnf, "root ::= \"a\" digit\ndigit ::= [0-9]");
  EXPECT_EQ(compiled->source(), "start: \"a\" DIGIT\nDIGIT: /[\\x{30}-\\x{39}]/\n");
}

TEST(GrammarCompilerTest, CompilesAndMakesMatchersOnOtherThreads) {
  const GrammarVocab& vocab = test::Stories();
  GrammarCompiler compiler(*vocab.grammar, {});
  std::vector<std::shared_ptr<const CompiledGrammar>> grammars(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < grammars.size(); ++i) {
    threads.emplace_back([&, i] {
      auto compiled = compiler.Compile(
          {GrammarKind::kJsonSchema,
           R"({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})"});
      if (compiled.ok()) grammars[i] = compiled.value();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& g : grammars) ASSERT_NE(g, nullptr);
  // Many threads take matchers from one shared grammar.
  threads.clear();
  std::vector<int> ok(8, 0);
  for (size_t i = 0; i < ok.size(); ++i) {
    threads.emplace_back([&, i] {
      GrammarMatcher matcher = grammars[0]->NewMatcher();
      std::vector<uint32_t> mask(matcher.bitmask_words());
      ok[i] =
          matcher.FillNextTokenBitmask(mask).ok() && matcher.AcceptToken(TokenFor(vocab, '{')).ok();
    });
  }
  for (auto& t : threads) t.join();
  for (int v : ok) EXPECT_EQ(v, 1);
}

}  // namespace
}  // namespace radixserve::sampling

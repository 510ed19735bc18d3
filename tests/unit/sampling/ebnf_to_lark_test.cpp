// ConvertEbnfToLark: hand-written expected Lark for small GBNF grammars, errors, and GBNF grammars
// compiled and random-walked with outputs checked by std::regex or a hand-written recognizer.
#include "sampling/ebnf_to_lark.h"

#include <gtest/gtest.h>

#include <regex>

#include "grammar_test_util.h"

namespace radixserve::sampling {
namespace {

std::string Lark(const std::string& gbnf) {
  auto lark = ConvertEbnfToLark(gbnf);
  EXPECT_TRUE(lark.ok()) << lark.status().message();
  return lark.ok() ? lark.value() : "";
}

TEST(EbnfToLarkTest, RulesLiteralsClassesAndRepeats) {
  EXPECT_EQ(Lark("root ::= \"yes\" | \"no\""), "start: \"yes\" | \"no\"\n");
  EXPECT_EQ(Lark("root ::= [a-c]+ \"\\n\" [^\"\\\\]*"),
            "start: /[\\x{61}-\\x{63}]/+ \"\\u000A\" /[^\\x{22}\\x{5C}]/*\n");
  EXPECT_EQ(Lark("root ::= (\"a\" | \"b\"){2,3} \"c\"{2} \"d\"{1,} \"e\"?"),
            "start: (\"a\" | \"b\"){2,3} \"c\"{2} \"d\"+ \"e\"?\n");
  EXPECT_EQ(Lark("root ::= \"\\x41\\u00e9\\U0001F642\\\"\""),
            "start: \"A\xC3\xA9\xF0\x9F\x99\x82\\\"\"\n");
  EXPECT_EQ(Lark("root ::= . \"x\"{0}"), "start: /(?s:.)/ \"\"\n");
}

TEST(EbnfToLarkTest, TerminalRulesBecomeTokensAndRecursiveRulesStayRules) {
  const std::string gbnf =
      "# a comment\n"
      "root ::= list   # trailing comment\n"
      "list ::= \"[\" ws (item (\",\" ws item)*)? \"]\"\n"
      "item ::= number | list\n"
      "number ::= digit+\n"
      "digit ::= [0-9]\n"
      "ws ::= \" \"*\n";
  EXPECT_EQ(Lark(gbnf),
            "start: list\n"
            "list: \"[\" WS (item (\",\" WS item)*)? \"]\"\n"
            "item: NUMBER | list\n"
            "NUMBER: DIGIT+\n"
            "DIGIT: /[\\x{30}-\\x{39}]/\n"
            "WS: \" \"*\n");
}

TEST(EbnfToLarkTest, NamesAreSanitizedAndRulesMaySpanLines) {
  EXPECT_EQ(Lark("root ::= my-Rule\n  | \"x\"\nmy-Rule ::= \"a\"\n  \"b\"\n2nd ::= \"c\"\n"),
            "start: MY_RULE | \"x\"\nMY_RULE: \"a\" \"b\"\nR_2ND: \"c\"\n");
}

TEST(EbnfToLarkTest, LarkPassesThrough) {
  const std::string lark = "start: /[a-z]+/\n";
  EXPECT_TRUE(LooksLikeLark(lark));
  EXPECT_EQ(Lark(lark), lark);
  EXPECT_TRUE(LooksLikeLark("%llguidance {}\nstart: \"a\""));
  EXPECT_FALSE(LooksLikeLark("root ::= \"a\""));
}

TEST(EbnfToLarkTest, Errors) {
  for (const char* bad :
       {"", "root ::= \"a", "root ::= [a-", "root ::= [z-a]", "root ::= []", "root ::= \"\\q\"",
        "root ::= (\"a\"", "root ::= \"a\" (= \"b\")", "root ::= \"a\"{3,1}", "root = \"a\"",
        "root ::= x", "x ::= \"a\"", "root ::= \"a\"\nroot ::= \"b\"", "root ::= \"\\uD800\""}) {
    auto lark = ConvertEbnfToLark(bad);
    EXPECT_FALSE(lark.ok()) << bad;
    if (!lark.ok()) {
      EXPECT_EQ(lark.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(EbnfToLarkTest, CompiledGbnfOutputsMatchTheEquivalentRegex) {
  const auto& vocab = test::Stories();
  const std::string gbnf =
      "root ::= answer \" \" number (\",\" number)*\n"
      "answer ::= \"yes\" | \"no\"\n"
      "number ::= [1-9] [0-9]{0,2}\n";
  const std::regex reference("(yes|no) [1-9][0-9]{0,2}(,[1-9][0-9]{0,2})*");
  auto compiled = test::MustCompile(vocab, GrammarKind::kEbnf, gbnf);
  ASSERT_NE(compiled, nullptr);
  for (uint32_t seed = 0; seed < 25; ++seed) {
    GrammarMatcher matcher = compiled->NewMatcher();
    const auto walk = test::RandomWalk(vocab, matcher, seed, 200);
    ASSERT_TRUE(walk.ended);
    const std::string text = test::Detokenize(vocab, walk.ids);
    EXPECT_TRUE(std::regex_match(text, reference)) << text;
  }
}

// Balanced parentheses: a recursive grammar no regex can check; a counter does.
TEST(EbnfToLarkTest, CompiledRecursiveGbnfOutputsAreBalanced) {
  const auto& vocab = test::Stories();
  auto compiled =
      test::MustCompile(vocab, GrammarKind::kEbnf, "root ::= pair+\npair ::= \"(\" pair* \")\"\n");
  ASSERT_NE(compiled, nullptr);
  for (uint32_t seed = 0; seed < 25; ++seed) {
    GrammarMatcher matcher = compiled->NewMatcher();
    const auto walk = test::RandomWalk(vocab, matcher, seed, 300, 0.3, 0.3);
    ASSERT_TRUE(walk.ended) << "seed " << seed;
    const std::string text = test::Detokenize(vocab, walk.ids);
    int depth = 0;
    for (char c : text) {
      ASSERT_TRUE(c == '(' || c == ')') << text;
      depth += c == '(' ? 1 : -1;
      ASSERT_GE(depth, 0) << text;
    }
    EXPECT_EQ(depth, 0) << text;
    EXPECT_FALSE(text.empty());
  }
}

}  // namespace
}  // namespace radixserve::sampling

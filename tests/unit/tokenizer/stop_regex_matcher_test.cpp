// StopRegexMatcher: matches like Python's re.search over the growing text (expected values worked
// out by hand with Python's re semantics), holds back only text a partial match may still claim,
// reports the leftmost match and the pattern as sent, and rejects bad patterns with a message.
#include "tokenizer/stop_regex_matcher.h"

#include <gtest/gtest.h>

namespace radixserve::tokenizer {
namespace {

StopRegexMatcher Matcher(std::vector<std::string> patterns) {
  std::vector<StopRegex> compiled;
  for (auto& p : patterns) {
    auto c = CompileStopRegex(p);
    EXPECT_TRUE(c.ok()) << c.status().message();
    compiled.push_back(std::move(c).value());
  }
  return StopRegexMatcher(std::move(compiled));
}

TEST(StopRegexMatcherTest, FindsAMatchAcrossGrowingText) {
  StopRegexMatcher m = Matcher({"[0-9]{3}"});
  auto r = m.Check("order 1");
  EXPECT_FALSE(r.match);
  EXPECT_EQ(r.safe_end, 6u);  // "1" may start the match
  r = m.Check("order 12");
  EXPECT_FALSE(r.match);
  EXPECT_EQ(r.safe_end, 6u);
  r = m.Check("order 12a 34");
  EXPECT_FALSE(r.match);
  EXPECT_EQ(r.safe_end, 10u);
  r = m.Check("order 12a 345 tail");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->begin, 10u);
  EXPECT_EQ(r.match->end, 13u);
  EXPECT_EQ(r.match->pattern, "[0-9]{3}");
}

TEST(StopRegexMatcherTest, CompleteMatchWinsOverALongerPossibleOne) {
  // re.search("[0-9]+", "abc 12") matches at once; the text is not held for more digits.
  StopRegexMatcher m = Matcher({"[0-9]+"});
  auto r = m.Check("abc 12");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->begin, 4u);
  EXPECT_EQ(r.match->end, 6u);
}

TEST(StopRegexMatcherTest, NothingHeldWithoutAPossibleMatch) {
  StopRegexMatcher m = Matcher({"END\\."});
  auto r = m.Check("once upon a time");
  EXPECT_FALSE(r.match);
  EXPECT_EQ(r.safe_end, 16u);
  r = m.Check("once upon a time EN");
  EXPECT_EQ(r.safe_end, 17u);
  r = m.Check("once upon a time ENX");
  EXPECT_EQ(r.safe_end, 20u);
}

TEST(StopRegexMatcherTest, LeftmostMatchAmongPatterns) {
  StopRegexMatcher m = Matcher({"world", "o"});
  auto r = m.Check("hello world");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->begin, 4u);
  EXPECT_EQ(r.match->pattern, "o");
}

TEST(StopRegexMatcherTest, EmptyMatchStopsAtOnce) {
  // re.search("x*", "abc") matches the empty string at 0.
  StopRegexMatcher m = Matcher({"x*"});
  auto r = m.Check("abc");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->begin, 0u);
  EXPECT_EQ(r.match->end, 0u);
}

TEST(StopRegexMatcherTest, UnicodeClasses) {
  StopRegexMatcher m = Matcher({"\\d\\s+\\w"});
  auto r = m.Check("caf\xC3\xA9 3  \xC3\xA9t\xC3\xA9");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->begin, 6u);
  EXPECT_EQ(r.match->end, 11u);
}

TEST(StopRegexMatcherTest, BadPatternNamesTheField) {
  auto c = CompileStopRegex("(unclosed");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("stop_regex"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace radixserve::tokenizer

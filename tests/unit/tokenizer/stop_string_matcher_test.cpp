#include "tokenizer/stop_string_matcher.h"

#include <gtest/gtest.h>

namespace radixserve::tokenizer {
namespace {

TEST(StopStringMatcherTest, HoldsBackAPossiblePrefix) {
  StopStringMatcher m({"STOP"});
  auto out = m.Feed("hello ST");
  EXPECT_EQ(out.text, "hello ");
  EXPECT_FALSE(out.matched);
  EXPECT_EQ(m.held(), "ST");
  out = m.Feed("ART");  // "START" is not a stop string
  EXPECT_EQ(out.text, "START");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopStringMatcherTest, CutsAtTheFirstMatchAcrossDeltas) {
  StopStringMatcher m({"</s>", "\n\n"});
  EXPECT_EQ(m.Feed("answer <").text, "answer ");
  auto out = m.Feed("/s> more\n\n");
  EXPECT_EQ(out.text, "");
  ASSERT_TRUE(out.matched);
  EXPECT_EQ(*out.matched, "</s>");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Feed("ignored").text, "");
}

TEST(StopStringMatcherTest, EarliestOccurrenceWinsOverListOrder) {
  StopStringMatcher m({"world", "lo"});
  auto out = m.Feed("hello world");
  EXPECT_EQ(out.text, "hel");
  EXPECT_EQ(*out.matched, "lo");
}

TEST(StopStringMatcherTest, FlushReleasesTheHeldTail) {
  StopStringMatcher m({"abc"});
  EXPECT_EQ(m.Feed("xxab").text, "xx");
  EXPECT_EQ(m.Flush(), "ab");
}

TEST(StopStringMatcherTest, NoStopStringsPassEverything) {
  StopStringMatcher m({"", ""});
  EXPECT_EQ(m.Feed("anything").text, "anything");
}

}  // namespace
}  // namespace radixserve::tokenizer

#include "tokenizer/pre_tokenizers.h"

#include <gtest/gtest.h>

#include "tokenizer/unicode.h"

namespace radixserve::tokenizer {
namespace {

std::vector<std::string> Texts(const std::vector<Piece>& pieces) {
  std::vector<std::string> out;
  for (const auto& p : pieces) out.push_back(p.text);
  return out;
}

std::vector<std::string> SplitWith(SplitBehavior behavior) {
  // "a-b--c" with every '-' a delimiter.
  const Piece p{"a-b--c", true};
  std::vector<Piece> out;
  SplitByRanges(p, {{1, 2}, {3, 4}, {4, 5}}, behavior, out);
  return Texts(out);
}

TEST(PreTokenizersTest, SplitBehaviors) {
  using V = std::vector<std::string>;
  EXPECT_EQ(SplitWith(SplitBehavior::kRemoved), (V{"a", "b", "c"}));
  EXPECT_EQ(SplitWith(SplitBehavior::kIsolated), (V{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(SplitWith(SplitBehavior::kContiguous), (V{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(SplitWith(SplitBehavior::kMergedWithPrevious), (V{"a-", "b-", "-", "c"}));
  EXPECT_EQ(SplitWith(SplitBehavior::kMergedWithNext), (V{"a", "-b", "-", "-c"}));
}

TEST(PreTokenizersTest, ByteLevelSplitsWithGpt2RegexAndMapsBytes) {
  ByteLevelPreTokenizer pre(/*add_prefix_space=*/false, /*use_regex=*/true);
  std::vector<Piece> pieces{{"Hello world's  x", true}};
  pre.PreTokenize(pieces);
  // Spaces are spelled U+0120 ("Ġ"); the double space leaves one space before " x".
  EXPECT_EQ(Texts(pieces),
            (std::vector<std::string>{"Hello", "\xC4\xA0world", "'s", "\xC4\xA0", "\xC4\xA0x"}));
}

TEST(PreTokenizersTest, ByteLevelPrefixSpace) {
  ByteLevelPreTokenizer pre(/*add_prefix_space=*/true, /*use_regex=*/false);
  std::vector<Piece> pieces{{"hi", true}};
  pre.PreTokenize(pieces);
  EXPECT_EQ(Texts(pieces), (std::vector<std::string>{"\xC4\xA0hi"}));
}

TEST(PreTokenizersTest, MetaspacePrependSchemes) {
  const std::string m = "\xE2\x96\x81";
  MetaspacePreTokenizer first(m, PrependScheme::kFirst, /*split=*/true);
  std::vector<Piece> pieces{{"a b", true}, {"c", false}};
  first.PreTokenize(pieces);
  EXPECT_EQ(Texts(pieces), (std::vector<std::string>{m + "a", m + "b", "c"}));
  MetaspacePreTokenizer always(m, PrependScheme::kAlways, /*split=*/false);
  pieces = {{"a b", false}};
  always.PreTokenize(pieces);
  EXPECT_EQ(Texts(pieces), (std::vector<std::string>{m + "a" + m + "b"}));
}

TEST(PreTokenizersTest, DigitsIndividuallyOrContiguous) {
  CharSplitPreTokenizer single(IsNumeric, SplitBehavior::kIsolated);
  std::vector<Piece> pieces{{"ab123c", true}};
  single.PreTokenize(pieces);
  EXPECT_EQ(Texts(pieces), (std::vector<std::string>{"ab", "1", "2", "3", "c"}));
  CharSplitPreTokenizer grouped(IsNumeric, SplitBehavior::kContiguous);
  pieces = {{"ab123c", true}};
  grouped.PreTokenize(pieces);
  EXPECT_EQ(Texts(pieces), (std::vector<std::string>{"ab", "123", "c"}));
}

TEST(PreTokenizersTest, InvertedRegexSplitKeepsMatches) {
  auto re = Regex::Compile("\\w+|[^\\w\\s]+");
  ASSERT_TRUE(re.ok());
  SplitPreTokenizer whitespace(std::move(re).value(), SplitBehavior::kRemoved, /*invert=*/true);
  std::vector<Piece> pieces{{"Hey  you!!", true}};
  whitespace.PreTokenize(pieces);
  EXPECT_EQ(Texts(pieces), (std::vector<std::string>{"Hey", "you", "!!"}));
}

TEST(PreTokenizersTest, BadRegexIsAnError) {
  auto re = Regex::Compile("(unclosed");
  EXPECT_FALSE(re.ok());
  EXPECT_EQ(re.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace radixserve::tokenizer

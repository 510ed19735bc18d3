#include "tokenizer/added_vocabulary.h"

#include <gtest/gtest.h>

namespace radixserve::tokenizer {
namespace {

// Renders sections as "[id]" for tokens and the text itself otherwise.
std::string Show(const std::vector<Section>& sections) {
  std::string out;
  for (const auto& s : sections) {
    if (s.token) {
      out.append("[").append(std::to_string(*s.token)).append("]");
    } else {
      out.append("{").append(s.text).append("}");
    }
  }
  return out;
}

AddedToken Tok(TokenId id, std::string content, bool special = true) {
  AddedToken t;
  t.id = id;
  t.content = std::move(content);
  t.special = special;
  t.special_parse_only = special;
  return t;
}

TEST(AddedVocabularyTest, LeftmostLongestNonOverlapping) {
  AddedVocabulary v({Tok(1, "<a>"), Tok(2, "<a><b>"), Tok(3, "b>")});
  EXPECT_EQ(Show(v.Split("x<a><b>y<a>", false, true)), "{x}[2]{y}[1]");
}

TEST(AddedVocabularyTest, SpecialTokensStayTextWithoutSpecialParsing) {
  AddedVocabulary v({Tok(1, "<s>"), Tok(2, "USER", /*special=*/false)});
  EXPECT_EQ(Show(v.Split("<s>USER", false, false)), "{<s>}[2]");
  EXPECT_EQ(Show(v.Split("<s>USER", false, true)), "[1][2]");
}

TEST(AddedVocabularyTest, LstripAndRstripSwallowWhitespace) {
  AddedToken t = Tok(7, "<m>");
  t.lstrip = true;
  t.rstrip = true;
  AddedVocabulary v({t});
  EXPECT_EQ(Show(v.Split("a  <m>\t b", false, true)), "{a}[7]{b}");
}

TEST(AddedVocabularyTest, SingleWordNeedsWordBoundaries) {
  AddedToken t = Tok(5, "cat");
  t.single_word = true;
  AddedVocabulary v({t});
  EXPECT_EQ(Show(v.Split("a cat.", false, true)), "{a }[5]{.}");
  EXPECT_EQ(Show(v.Split("concat", false, true)), "{concat}");
  EXPECT_EQ(Show(v.Split("cats", false, true)), "{cats}");
}

TEST(AddedVocabularyTest, NormalizedTokensAreASeparateSet) {
  AddedToken t = Tok(9, "<x>");
  t.normalized = true;
  AddedVocabulary v({t});
  EXPECT_EQ(Show(v.Split("a<x>", false, true)), "{a<x>}");
  EXPECT_EQ(Show(v.Split("a<x>", true, true)), "{a}[9]");
}

}  // namespace
}  // namespace radixserve::tokenizer

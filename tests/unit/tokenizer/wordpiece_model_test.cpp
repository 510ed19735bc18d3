#include "tokenizer/wordpiece_model.h"

#include <gtest/gtest.h>

namespace radixserve::tokenizer {
namespace {

TEST(WordPieceModelTest, GreedyLongestMatchWithContinuationPrefix) {
  // 0:[UNK] 1:un 2:##aff 3:##able 4:##a 5:unaff
  WordPieceModel m(Vocab({"[UNK]", "un", "##aff", "##able", "##a", "unaff"}), 0, "##", 100);
  std::vector<TokenId> out;
  m.Tokenize("unaffable", out);
  EXPECT_EQ(out, (std::vector<TokenId>{5, 3}));
  out.clear();
  m.Tokenize("unable", out);
  EXPECT_EQ(out, (std::vector<TokenId>{1, 3}));
}

TEST(WordPieceModelTest, UnmatchedRemainderMakesTheWordUnknown) {
  WordPieceModel m(Vocab({"[UNK]", "un", "##able"}), 0, "##", 100);
  std::vector<TokenId> out;
  m.Tokenize("unxable", out);
  EXPECT_EQ(out, (std::vector<TokenId>{0}));
}

TEST(WordPieceModelTest, OverlongWordIsUnknown) {
  WordPieceModel m(Vocab({"[UNK]", "a", "##a"}), 0, "##", 3);
  std::vector<TokenId> out;
  m.Tokenize("aaaa", out);
  EXPECT_EQ(out, (std::vector<TokenId>{0}));
  out.clear();
  m.Tokenize("aaa", out);
  EXPECT_EQ(out, (std::vector<TokenId>{1, 2, 2}));
}

}  // namespace
}  // namespace radixserve::tokenizer

#include "tokenizer/bpe_model.h"

#include <gtest/gtest.h>

namespace radixserve::tokenizer {
namespace {

std::vector<TokenId> Ids(const Model& m, std::string_view piece) {
  std::vector<TokenId> out;
  m.Tokenize(piece, out);
  return out;
}

// 0:a 1:b 2:c 3:ab 4:bc 5:abc 6:<unk>
BpeModel MergesModel(BpeOptions opts, std::vector<std::pair<std::string, std::string>> merges) {
  auto m = BpeModel::FromMerges(Vocab({"a", "b", "c", "ab", "bc", "abc", "<unk>"}), merges, opts);
  EXPECT_TRUE(m.ok());
  return std::move(m).value();
}

TEST(BpeModelTest, LowerRankMergesFirst) {
  // "b c" outranks "a b": abc -> a + bc, and no "a bc" merge exists.
  auto m = MergesModel({}, {{"b", "c"}, {"a", "b"}});
  EXPECT_EQ(Ids(m, "abc"), (std::vector<TokenId>{0, 4}));
  // "a b" first, then "ab c".
  auto m2 = MergesModel({}, {{"a", "b"}, {"ab", "c"}, {"b", "c"}});
  EXPECT_EQ(Ids(m2, "abc"), (std::vector<TokenId>{5}));
}

TEST(BpeModelTest, EqualRanksMergeLeftmostFirst) {
  auto m = MergesModel({}, {{"a", "b"}});
  EXPECT_EQ(Ids(m, "abab"), (std::vector<TokenId>{3, 3}));
  EXPECT_EQ(Ids(m, "aab"), (std::vector<TokenId>{0, 3}));
}

TEST(BpeModelTest, UnknownCharactersUseUnkFusedOrNot) {
  BpeOptions opts;
  opts.unk_id = 6;
  opts.fuse_unk = true;
  EXPECT_EQ(Ids(MergesModel(opts, {}), "axyb"), (std::vector<TokenId>{0, 6, 1}));
  opts.fuse_unk = false;
  EXPECT_EQ(Ids(MergesModel(opts, {}), "axyb"), (std::vector<TokenId>{0, 6, 6, 1}));
  // Without an unknown token the character is dropped, as HF tokenizers does.
  EXPECT_EQ(Ids(MergesModel({}, {}), "axb"), (std::vector<TokenId>{0, 1}));
}

TEST(BpeModelTest, ByteFallbackSpellsUnknownCharacters) {
  std::vector<std::string> tokens = {"a"};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    tokens.push_back(name);
  }
  BpeOptions opts;
  opts.byte_fallback = true;
  auto m = BpeModel::FromMerges(Vocab(tokens), {}, opts);
  ASSERT_TRUE(m.ok());
  // "é" is C3 A9 -> ids 1 + 0xC3, 1 + 0xA9.
  EXPECT_EQ(Ids(*m, "a\xC3\xA9"), (std::vector<TokenId>{0, 1 + 0xC3, 1 + 0xA9}));
}

TEST(BpeModelTest, IgnoreMergesEmitsWholeTokens) {
  // "abc" is in the vocabulary but no merge chain reaches it.
  BpeOptions opts;
  opts.ignore_merges = true;
  EXPECT_EQ(Ids(MergesModel(opts, {}), "abc"), (std::vector<TokenId>{5}));
  EXPECT_EQ(Ids(MergesModel({}, {}), "abc"), (std::vector<TokenId>{0, 1, 2}));
}

TEST(BpeModelTest, MergeWithMissingTokenIsAnError) {
  auto m = BpeModel::FromMerges(Vocab({"a", "b"}), {{"a", "b"}}, {});
  EXPECT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kDataLoss);
}

TEST(BpeModelTest, ScoresMergeHighestScoringTokenFirst) {
  // SentencePiece: "bc" scores higher than "ab", so abc -> a + bc.
  auto m = BpeModel::FromScores(Vocab({"a", "b", "c", "ab", "bc"}), {0, 0, 0, -2.0f, -1.0f}, {});
  EXPECT_EQ(Ids(m, "abc"), (std::vector<TokenId>{0, 4}));
  auto m2 = BpeModel::FromScores(Vocab({"a", "b", "c", "ab", "bc"}), {0, 0, 0, -1.0f, -2.0f}, {});
  EXPECT_EQ(Ids(m2, "abc"), (std::vector<TokenId>{3, 2}));
  // Ties merge leftmost.
  auto m3 = BpeModel::FromScores(Vocab({"a", "aa"}), {0, -1.0f}, {});
  EXPECT_EQ(Ids(m3, "aaa"), (std::vector<TokenId>{1, 0}));
}

}  // namespace
}  // namespace radixserve::tokenizer

#include "tokenizer/tokenizer_loader.h"

#include <gtest/gtest.h>

namespace radixserve::tokenizer {
namespace {

const std::string kStoriesDir = std::string(RADIX_SHARED_DIR) + "/models/stories260K";

// A whole tokenizer.json: BERT-style WordPiece with lowercasing.
constexpr const char* kWordPieceJson = R"({
  "added_tokens": [{"id": 0, "content": "[UNK]", "special": true},
                   {"id": 1, "content": "[CLS]", "special": true},
                   {"id": 2, "content": "[SEP]", "special": true}],
  "normalizer": {"type": "BertNormalizer", "lowercase": true},
  "pre_tokenizer": {"type": "BertPreTokenizer"},
  "post_processor": {"type": "BertProcessing", "cls": ["[CLS]", 1], "sep": ["[SEP]", 2]},
  "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
  "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3, "world": 4, "!": 5,
                      "un": 6, "##known": 7}}
})";

TEST(TokenizerLoaderTest, WordPieceJsonEndToEnd) {
  auto tok = ParseTokenizerJson(kWordPieceJson, "");
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ((*tok)->Encode("Hello, WORLD! unknown"),
            (std::vector<TokenId>{1, 3, 0, 4, 5, 6, 7, 2}));
  EXPECT_EQ((*tok)->Decode(std::vector<TokenId>{1, 3, 4, 5, 6, 7, 2}), "hello world! unknown");
  EXPECT_EQ((*tok)->Decode(std::vector<TokenId>{1, 3, 2}, DecodeOptions{false, true}),
            "[CLS] hello [SEP]");
}

TEST(TokenizerLoaderTest, ErrorsAreValues) {
  EXPECT_EQ(ParseTokenizerJson("{not json", "").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(
      ParseTokenizerJson(R"({"model": {"type": "WordLevel", "vocab": {}}})", "").status().code(),
      StatusCode::kUnsupported);
  EXPECT_EQ(LoadTokenizer("/nonexistent/tokenizer.json").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LoadGgufTokenizer(kStoriesDir + "/hf/tokenizer.json").status().code(),
            StatusCode::kDataLoss);
}

// Unigram: the highest-scoring segmentation (worked by hand), unknown characters fused into one
// unknown token, or spelled as <0xXX> tokens with byte_fallback.
TEST(TokenizerLoaderTest, UnigramTakesTheBestSegmentation) {
  auto tok = ParseTokenizerJson(R"({"model": {"type": "Unigram", "unk_id": 0, "vocab": [
      ["<unk>", 0], ["a", -2], ["b", -2], ["ab", -3], ["abc", -10], ["c", -2.5],
      ["<0x78>", -30], ["<0x79>", -30]]}})",
                                "");
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ((*tok)->Encode("ab"), (std::vector<TokenId>{3}));      // -3 beats a + b = -4
  EXPECT_EQ((*tok)->Encode("abc"), (std::vector<TokenId>{3, 5}));  // -5.5 beats abc = -10
  EXPECT_EQ((*tok)->Encode("xyb"), (std::vector<TokenId>{0, 2}));  // x, y: one <unk>
  auto bytes = ParseTokenizerJson(R"({"model": {"type": "Unigram", "unk_id": 0,
      "byte_fallback": true, "vocab": [["<unk>", 0], ["b", -2], ["<0x78>", -30],
      ["<0x79>", -30]]}})",
                                  "");
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  EXPECT_EQ((*bytes)->Encode("xyb"), (std::vector<TokenId>{2, 3, 1}));
  EXPECT_EQ((*bytes)->Encode("zb"), (std::vector<TokenId>{0, 1}));  // no <0x7A>: <unk>
}

TEST(TokenizerLoaderTest, StoriesJsonAndGgufAgree) {
  auto json = LoadTokenizer(kStoriesDir + "/hf/tokenizer.json");
  auto gguf = LoadTokenizer(kStoriesDir + "/gguf/stories260K.gguf");
  ASSERT_TRUE(json.ok()) << json.status().message();
  ASSERT_TRUE(gguf.ok()) << gguf.status().message();
  EXPECT_EQ((*gguf)->vocab_size(), 512u);
  EXPECT_EQ((*gguf)->bos_id(), 1);
  EXPECT_EQ((*gguf)->eos_ids(), std::vector<TokenId>{2});
  for (const char* text : {"Once upon a time, there was a cat.", "  two spaces", "<s>x</s>y",
                           "\xE4\xBD\xA0\xE5\xA5\xBD 🙂"}) {
    const auto a = (*json)->Encode(text);
    EXPECT_EQ(a, (*gguf)->Encode(text)) << text;
    EXPECT_EQ(a.front(), 1);  // BOS from the template / add_bos_token
    EXPECT_EQ((*json)->Decode(a), (*gguf)->Decode(a));
  }
}

}  // namespace
}  // namespace radixserve::tokenizer

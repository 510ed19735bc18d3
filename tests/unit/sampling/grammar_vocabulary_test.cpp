// Token bytes derived from real vocabularies: the bytes of an encoded text's tokens concatenate to
// the text itself (the oracle is the input text), byte-fallback and byte-level pieces carry their
// raw bytes, special tokens carry llguidance's 0xFF marker.
#include "sampling/grammar_vocabulary.h"

#include <gtest/gtest.h>

#include "../test_reference.h"

#include "grammar_test_util.h"

namespace radixserve::sampling {
namespace {

const char* const kTexts[] = {
    "Hello, world!",
    "Once upon a time, there was a little dog.\nIt said \"woof\".",
    "{\"name\": \"Ana\", \"age\": 7}",
    "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x99\x82 tabs\tand  spaces",
};

std::string Concat(const GrammarVocabulary& vocab, const std::vector<tokenizer::TokenId>& ids) {
  std::string text;
  for (auto id : ids) text += vocab.token_bytes[static_cast<size_t>(id)];
  return text;
}

TEST(GrammarVocabularyTest, StoriesTokensConcatenateToTheText) {
  const auto& tok = *test::Stories().tokenizer;
  const auto vocab = GrammarVocabularyFromTokenizer(tok, 512, tok.eos_ids());
  ASSERT_EQ(vocab.token_bytes.size(), 512u);
  for (const char* text : kTexts) {
    const auto ids = tok.Encode(text, {.add_special_tokens = false});
    // SentencePiece (Llama) prepends one space to the text it encodes.
    EXPECT_EQ(Concat(vocab, ids), std::string(" ") + text);
  }
  EXPECT_EQ(vocab.token_bytes[static_cast<size_t>(*tok.TokenToId("<0x41>"))], "A");
  EXPECT_EQ(vocab.token_bytes[static_cast<size_t>(*tok.TokenToId("<0xE6>"))], "\xE6");
  EXPECT_EQ(vocab.token_bytes[static_cast<size_t>(*tok.TokenToId("\xE2\x96\x81"))], " ");
  EXPECT_EQ(vocab.token_bytes[2], "\xFF</s>");
  EXPECT_EQ(vocab.eos_ids, std::vector<int32_t>{2});
}

TEST(GrammarVocabularyTest, SmolLM2TokensConcatenateToTheText) {
  const test::GrammarVocab* smol = test::SmolLM2();
  if (smol == nullptr) {
    RADIX_SKIP_WITHOUT_REFERENCE("SmolLM2 not in the model cache (scripts/setup)");
  }
  const auto& tok = *smol->tokenizer;
  const auto vocab =
      GrammarVocabularyFromTokenizer(tok, static_cast<int32_t>(tok.vocab_size()), tok.eos_ids());
  for (const char* text : kTexts) {
    EXPECT_EQ(Concat(vocab, tok.Encode(text, {.add_special_tokens = false})), text);
  }
  const auto space = tok.TokenToId("\xC4\xA0");  // "Ġ"
  ASSERT_TRUE(space.has_value());
  EXPECT_EQ(vocab.token_bytes[static_cast<size_t>(*space)], " ");
  const auto im_end = tok.TokenToId("<|im_end|>");
  ASSERT_TRUE(im_end.has_value());
  EXPECT_EQ(vocab.token_bytes[static_cast<size_t>(*im_end)], "\xFF<|im_end|>");
}

// llguidance tokenizes forced text from the middle of an output: no prefix space may appear.
TEST(GrammarVocabularyTest, FragmentsTokenizeWithoutAPrefixSpace) {
  std::vector<const test::GrammarVocab*> vocabs = {&test::Stories()};
  if (test::SmolLM2() != nullptr) vocabs.push_back(test::SmolLM2());
  for (const auto* v : vocabs) {
    const auto& tok = *v->tokenizer;
    const auto vocab =
        GrammarVocabularyFromTokenizer(tok, static_cast<int32_t>(tok.vocab_size()), tok.eos_ids());
    for (const char* text : {"-", "{", "\"name\": ", " the end", "\n}", "x"}) {
      const auto ids = vocab.tokenize(text);
      std::string joined;
      for (int32_t id : ids) joined += vocab.token_bytes[static_cast<size_t>(id)];
      EXPECT_EQ(joined, text);
    }
  }
  const auto& stories = *test::Stories().tokenizer;
  const auto vocab = GrammarVocabularyFromTokenizer(stories, 512, stories.eos_ids());
  EXPECT_EQ(vocab.tokenize("-"), std::vector<int32_t>{*stories.TokenToId("-")});
}

TEST(GrammarVocabularyTest, RowsPastTheTokenizerHaveNoBytes) {
  const auto& tok = *test::Stories().tokenizer;
  const auto vocab = GrammarVocabularyFromTokenizer(tok, 520, tok.eos_ids());
  ASSERT_EQ(vocab.token_bytes.size(), 520u);
  for (size_t id = 512; id < 520; ++id) EXPECT_TRUE(vocab.token_bytes[id].empty());
  auto grammar = GrammarTokenizer::Create(vocab);
  ASSERT_TRUE(grammar.ok()) << grammar.status().message();
  EXPECT_EQ((*grammar)->vocab_size(), 520);
  EXPECT_EQ((*grammar)->bitmask_words(), 17u);
}

TEST(GrammarVocabularyTest, TokenizerRejectsBadVocabularies) {
  const auto& tok = *test::Stories().tokenizer;
  auto vocab = GrammarVocabularyFromTokenizer(tok, 512, {});
  EXPECT_EQ(GrammarTokenizer::Create(vocab).status().code(), StatusCode::kInvalidArgument);
  vocab.eos_ids = {512};
  EXPECT_EQ(GrammarTokenizer::Create(vocab).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(GrammarTokenizer::Create(GrammarVocabulary{}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace radixserve::sampling

#include "tokenizer/normalizers.h"

#include <gtest/gtest.h>

namespace radixserve::tokenizer {
namespace {

std::string Apply(const Normalizer& n, std::string text) {
  n.Normalize(text);
  return text;
}

TEST(NormalizersTest, UnicodeForms) {
  // "é" decomposed (e + U+0301) composes under NFC; "ﬁ" (U+FB01) expands under NFKC only.
  EXPECT_EQ(Apply(UnicodeNormalizer(NormalForm::kNfc), "e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(Apply(UnicodeNormalizer(NormalForm::kNfd), "\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(Apply(UnicodeNormalizer(NormalForm::kNfc), "\xEF\xAC\x81"), "\xEF\xAC\x81");
  EXPECT_EQ(Apply(UnicodeNormalizer(NormalForm::kNfkc), "\xEF\xAC\x81"), "fi");
}

TEST(NormalizersTest, LowercaseIsUnicodeAware) {
  EXPECT_EQ(Apply(LowercaseNormalizer(), "HeLLo \xC3\x89T\xC3\x89"), "hello \xC3\xA9t\xC3\xA9");
}

TEST(NormalizersTest, SentencePieceStylePrependAndReplace) {
  std::vector<std::unique_ptr<Normalizer>> steps;
  steps.push_back(std::make_unique<PrependNormalizer>("\xE2\x96\x81"));
  steps.push_back(std::make_unique<ReplaceNormalizer>(" ", "\xE2\x96\x81"));
  SequenceNormalizer seq(std::move(steps));
  EXPECT_EQ(Apply(seq, "a b"),
            "\xE2\x96\x81"
            "a\xE2\x96\x81"
            "b");
  EXPECT_EQ(Apply(seq, ""), "");  // nothing is prepended to empty text
}

TEST(NormalizersTest, RegexReplaceAndStrip) {
  auto re = Regex::Compile("\\s+");
  ASSERT_TRUE(re.ok());
  EXPECT_EQ(Apply(ReplaceNormalizer(std::move(re).value(), " "), "a \t\n b"), "a b");
  EXPECT_EQ(Apply(StripNormalizer(true, false), " \t x "), "x ");
  EXPECT_EQ(Apply(StripNormalizer(true, true), "\xE3\x80\x80x\xE3\x80\x80"), "x");  // U+3000
}

TEST(NormalizersTest, BertCleansPadsChineseAndStripsAccents) {
  BertNormalizer bert(/*clean_text=*/true, /*handle_chinese_chars=*/true, /*strip_accents=*/true,
                      /*lowercase=*/true);
  // Tab -> space, U+0000 dropped, 中 padded with spaces, "É" -> "e".
  using namespace std::string_literals;
  EXPECT_EQ(Apply(bert,
                  "A\tB\x00"
                  "C\xE4\xB8\xAD\xC3\x89"s),
            "a bc \xE4\xB8\xAD e");
}

}  // namespace
}  // namespace radixserve::tokenizer

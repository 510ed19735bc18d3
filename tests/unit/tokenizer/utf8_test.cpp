#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace radixserve::tokenizer {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8Test, ValidTextIsUnchanged) {
  const std::string s = "a\xC3\xA9\xE4\xB8\x80\xF0\x9F\x98\x80";  // a é 一 😀
  EXPECT_TRUE(IsValidUtf8(s));
  EXPECT_EQ(SanitizeUtf8(s), s);
  EXPECT_EQ(CountCodePoints(s), 4u);
}

TEST(Utf8Test, MaximalSubpartsBecomeOneReplacementEach) {
  // Truncated 3-byte sequence followed by ASCII: one U+FFFD for the two bytes.
  EXPECT_EQ(SanitizeUtf8("\xE4\xB8"
                         "a"),
            kFffd + "a");
  // F0 80: 80 cannot follow F0, so each byte is its own maximal subpart.
  EXPECT_EQ(SanitizeUtf8("\xF0\x80"), kFffd + kFffd);
  // Encoded surrogate ED A0 80: ED may not be followed by A0 -> three replacements.
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);
  // Overlong C0 AF: C0 is never valid.
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), kFffd + kFffd);
  // Truncated 4-byte emoji at the end.
  EXPECT_EQ(SanitizeUtf8("x\xF0\x9F\x98"), "x" + kFffd);
  EXPECT_FALSE(IsValidUtf8("\xFF"));
}

TEST(Utf8Test, AppendEncodesEveryLength) {
  std::string s;
  AppendUtf8(s, U'A');
  AppendUtf8(s, 0xE9);
  AppendUtf8(s, 0x4E00);
  AppendUtf8(s, 0x1F600);
  EXPECT_EQ(s, "A\xC3\xA9\xE4\xB8\x80\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace radixserve::tokenizer

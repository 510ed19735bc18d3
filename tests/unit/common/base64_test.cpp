#include "common/base64.h"

#include <gtest/gtest.h>

namespace radixserve {
namespace {

// RFC 4648 section 10's test vectors.
TEST(Base64, RfcTestVectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
}

// RFC 4648 section 5: '-' and '_' replace '+' and '/'.
TEST(Base64, UrlSafeAlphabet) {
  const std::string bytes("\xfb\xff\xbf", 3);
  EXPECT_EQ(Base64Encode(bytes), "+/+/");
  EXPECT_EQ(Base64Encode(bytes, Base64Alphabet::kUrlSafe), "-_-_");
}

// Decoding inverts the RFC vectors (padding optional) and refuses what is not base64.
TEST(Base64, DecodeRfcVectorsAndRejectsMalformedText) {
  for (const char* text : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    EXPECT_EQ(Base64Decode(Base64Encode(text)), std::string(text)) << text;
  }
  EXPECT_EQ(Base64Decode("Zm9vYg"), "foob");
  EXPECT_EQ(Base64Decode("+/+/"), std::string("\xfb\xff\xbf", 3));
  EXPECT_EQ(Base64Decode("Zm9v!"), std::nullopt);
  EXPECT_EQ(Base64Decode("Zm9vY"), std::nullopt);
  EXPECT_EQ(Base64Decode("-_-_"), std::nullopt);
}

}  // namespace
}  // namespace radixserve

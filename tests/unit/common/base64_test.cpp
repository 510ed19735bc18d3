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

}  // namespace
}  // namespace radixserve

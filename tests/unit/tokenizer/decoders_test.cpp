#include "tokenizer/decoders.h"

#include <gtest/gtest.h>

namespace radixserve::tokenizer {
namespace {

std::string Join(std::vector<std::string> tokens, const Decoder& d) {
  d.Decode(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

TEST(DecodersTest, ByteLevelMapsBackAndReplacesBrokenBytes) {
  ByteLevelDecoder d;
  // "Ġhi" -> " hi"; "Ã©" is the byte-level spelling of C3 A9 (é).
  EXPECT_EQ(Join({"\xC4\xA0hi", "\xC3\x83\xC2\xA9"}, d), " hi\xC3\xA9");
  // A lone C3 byte ("Ã") cannot stand alone: U+FFFD.
  EXPECT_EQ(Join({"a", "\xC3\x83"}, d), "a\xEF\xBF\xBD");
}

TEST(DecodersTest, ByteFallbackRuns) {
  ByteFallbackDecoder d;
  EXPECT_EQ(Join({"a", "<0xC3>", "<0xA9>", "b"}, d),
            "a\xC3\xA9"
            "b");
  // An invalid run becomes one U+FFFD per byte token.
  EXPECT_EQ(Join({"<0xC3>", "<0x41>"}, d), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(Join({"<0x41>"}, d), "A");
}

TEST(DecodersTest, SentencePieceChain) {
  std::vector<std::unique_ptr<Decoder>> steps;
  steps.push_back(std::make_unique<ReplaceDecoder>("\xE2\x96\x81", " "));
  steps.push_back(std::make_unique<ByteFallbackDecoder>());
  steps.push_back(std::make_unique<FuseDecoder>());
  steps.push_back(std::make_unique<StripDecoder>(" ", 1, 0));
  SequenceDecoder d(std::move(steps));
  EXPECT_EQ(Join({"\xE2\x96\x81Hello", "\xE2\x96\x81world", "<0x21>"}, d), "Hello world!");
  // Only one leading space is stripped.
  EXPECT_EQ(Join({"\xE2\x96\x81", "\xE2\x96\x81x"}, d), " x");
}

TEST(DecodersTest, MetaspaceDropsReplacementInFirstToken) {
  MetaspaceDecoder d("\xE2\x96\x81", PrependScheme::kAlways);
  EXPECT_EQ(Join({"\xE2\x96\x81Hey", "\xE2\x96\x81you"}, d), "Hey you");
  MetaspaceDecoder never("\xE2\x96\x81", PrependScheme::kNever);
  EXPECT_EQ(Join({"\xE2\x96\x81Hey"}, never), " Hey");
}

TEST(DecodersTest, WordPieceJoinsContinuations) {
  WordPieceDecoder d("##", /*cleanup=*/true);
  EXPECT_EQ(Join({"un", "##aff", "##able", "day", "."}, d), "unaffable day.");
}

}  // namespace
}  // namespace radixserve::tokenizer

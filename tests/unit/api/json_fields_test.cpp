// Typed field reads: the reference is what a Python client means by the value (pydantic's int
// and bool fields, Python's int range for token ids), never a silent C++ narrowing.
#include "api/json_fields.h"

#include <gtest/gtest.h>

namespace radixserve::api {
namespace {

using nlohmann::json;

TEST(JsonFieldsTest, IntegersAreCheckedNotNarrowed) {
  EXPECT_EQ(*ReadInt(json(5), "x"), 5);
  EXPECT_EQ(*ReadInt(json(5.0), "x"), 5);
  EXPECT_FALSE(ReadInt(json(5.5), "x").ok());
  EXPECT_FALSE(ReadInt(json(true), "x").ok());
  EXPECT_FALSE(ReadInt(json("5"), "x").ok());
  EXPECT_FALSE(ReadInt(json(18446744073709551615ull), "x").ok());  // 2^64-1 does not wrap to -1
  EXPECT_FALSE(ReadInt(json(9.3e18), "x").ok());
  EXPECT_EQ(*ReadInt(json(9223372036854775807ll), "x"), INT64_MAX);
  auto range = ReadInt(json(4294967297ll), "top_logprobs_num", 0, 100);
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("top_logprobs_num"), std::string::npos);
  // Parsed non-negative numbers are unsigned in nlohmann::json: the lower bound applies too.
  EXPECT_FALSE(ReadInt(json::parse("0"), "max_new_tokens", 1).ok());
  EXPECT_FALSE(ReadInt(json::parse("2"), "x", 3, 10).ok());
  EXPECT_EQ(*ReadInt(json::parse("3"), "x", 3, 10), 3);
}

TEST(JsonFieldsTest, OptionalFieldsNameTheField) {
  json body = {{"stream", "yes"}, {"n", nullptr}, {"rid", 3}};
  auto stream = ReadOptionalBool(body, "stream");
  ASSERT_FALSE(stream.ok());
  EXPECT_NE(stream.status().message().find("stream"), std::string::npos);
  EXPECT_FALSE(ReadOptionalInt(body, "n")->has_value());
  EXPECT_FALSE(ReadOptionalInt(body, "missing")->has_value());
  EXPECT_FALSE(ReadOptionalString(body, "rid").ok());
}

TEST(JsonFieldsTest, TokenIdsAreIntegersInsideTheVocabulary) {
  EXPECT_EQ(*ReadTokenIds(json::array({0, 1, 511}), "input_ids", 512),
            (std::vector<int32_t>{0, 1, 511}));
  EXPECT_FALSE(ReadTokenIds(json::array({512}), "input_ids", 512).ok());
  EXPECT_FALSE(ReadTokenIds(json::array({-1}), "input_ids", 512).ok());
  EXPECT_FALSE(ReadTokenIds(json::array({1099511627776ll}), "input_ids", 512).ok());  // 2^40
  EXPECT_FALSE(ReadTokenIds(json::array({4294967296ll}), "input_ids", 512).ok());     // 2^32
  EXPECT_FALSE(ReadTokenIds(json::array({1.5}), "input_ids", 512).ok());
  EXPECT_FALSE(ReadTokenIds(json::array({true}), "input_ids", 512).ok());
  EXPECT_FALSE(ReadTokenIds(json(3), "input_ids", 512).ok());
  auto bad = ReadTokenIds(json::array({1, "2"}), "prompt", 512);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("prompt"), std::string::npos);
}

}  // namespace
}  // namespace radixserve::api

// Request-body parsing limits. The reference for "valid JSON" is the JSON grammar itself
// (RFC 8259): the depth limit must neither reject a shallow document nor be fooled by brackets
// inside strings.
#include "api/json_body.h"

#include <gtest/gtest.h>

#include <string>

namespace radixserve::api {
namespace {

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonBodyTest, DepthAtTheLimitParsesOneBeyondIsRefused) {
  EXPECT_TRUE(ParseJsonBody(Nested(kMaxJsonDepth)).ok());
  auto deeper = ParseJsonBody(Nested(kMaxJsonDepth + 1));
  ASSERT_FALSE(deeper.ok());
  EXPECT_EQ(deeper.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(deeper.status().message().find("128"), std::string::npos);
}

TEST(JsonBodyTest, MillionLevelsAreRefusedWithoutRecursion) {
  const std::string body = "{\"text\": " + Nested(1'000'000) + "}";
  EXPECT_FALSE(ParseJsonBody(body).ok());
  std::string objects;
  for (int i = 0; i < 200'000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(200'000, '}');
  EXPECT_FALSE(ParseOrderedJsonBody(objects).ok());
}

TEST(JsonBodyTest, BracketsInsideStringsDoNotCount) {
  const std::string text =
      "{\"text\": \"" + std::string(500, '[') + "\\\"" + std::string(500, '{') + "\"}";
  auto parsed = ParseJsonBody(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ((*parsed)["text"].get<std::string>().size(), 1001u);
}

TEST(JsonBodyTest, InvalidJsonAndOverflowingNumbers) {
  EXPECT_FALSE(ParseJsonBody("{\"a\": NaN}").ok());
  EXPECT_FALSE(ParseJsonBody("{\"a\": Infinity}").ok());
  EXPECT_FALSE(ParseJsonBody("{\"a\": 1e999}").ok());
  EXPECT_FALSE(ParseJsonBody("{\"a\": -1e999}").ok());
  EXPECT_FALSE(ParseJsonBody("{\"a\": ").ok());
  EXPECT_TRUE(ParseJsonBody("{\"a\": 1e308}").ok());
  EXPECT_TRUE(ParseJsonBody("{\"a\": 18446744073709551616}").ok());  // a double, finite
}

TEST(JsonBodyTest, ObjectBodiesRefuseOtherValuesAsSchemaErrors) {
  EXPECT_TRUE(ParseJsonObjectBody("{\"a\": 1}").ok());
  auto array = ParseJsonObjectBody("[1]");
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().status, 400);
  EXPECT_EQ(array.status().type, "Bad Request");
  EXPECT_EQ(array.status().message, "The request body must be a JSON object.");
  EXPECT_FALSE(ParseOrderedJsonObjectBody("{").ok());
}

}  // namespace
}  // namespace radixserve::api

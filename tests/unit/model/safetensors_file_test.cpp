// SafetensorsFile: parses the stories260K HF weights; validates headers before data is used.
#include "model/safetensors_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace radixserve::model {
namespace {

const std::string kStories =
    std::string(RADIX_SHARED_DIR) + "/models/stories260K/hf/model.safetensors";

std::vector<uint8_t> Build(const std::string& header, size_t data_bytes) {
  std::string bytes(8 + header.size() + data_bytes, '\0');
  const uint64_t len = header.size();
  std::memcpy(bytes.data(), &len, 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

Status ParseStatus(const std::string& header, size_t data_bytes) {
  return SafetensorsFile::Parse(MappedFile::FromBytes(Build(header, data_bytes), "t.safetensors"))
      .status();
}

TEST(SafetensorsFileTest, ParsesStories260K) {
  auto st = SafetensorsFile::Open(kStories, false);
  ASSERT_TRUE(st.ok()) << st.status().message();
  const SafetensorsTensor* embed = st->Find("model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(embed->format, kernels::WeightFormat::kF32);
}

TEST(SafetensorsFileTest, ParsesValidHeader) {
  auto st = SafetensorsFile::Parse(MappedFile::FromBytes(
      Build(
          R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]},)"
          R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[12,16]}})",
          16),
      "t.safetensors"));
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->metadata().at("format"), "pt");
  EXPECT_EQ(st->Find("a")->format, kernels::WeightFormat::kF16);
  EXPECT_EQ(st->Find("b")->bytes, 4);
}

TEST(SafetensorsFileTest, RejectsMalformedHeaders) {
  EXPECT_EQ(ParseStatus("{not json", 0).code(), StatusCode::kDataLoss);
  EXPECT_EQ(ParseStatus("[]", 0).code(), StatusCode::kDataLoss);
  // out of bounds
  Status s = ParseStatus(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("tensor w"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("t.safetensors"), std::string::npos);
  // size does not match shape
  EXPECT_FALSE(ParseStatus(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16).ok());
  // overlap
  s = ParseStatus(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                  16);
  EXPECT_NE(s.message().find("overlap"), std::string::npos) << s.message();
  // unknown and unsupported dtypes
  EXPECT_EQ(ParseStatus(R"({"w":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}})", 1).code(),
            StatusCode::kDataLoss);
  // other valid dtypes parse but are only listed, and must still fit their span
  EXPECT_TRUE(ParseStatus(R"({"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8).ok());
  EXPECT_FALSE(ParseStatus(R"({"w":{"dtype":"I64","shape":[2],"data_offsets":[0,8]}})", 8).ok());
  s = ParseStatus(R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                  16);
  EXPECT_NE(s.message().find("overlap"), std::string::npos) << s.message();
  // negative shape, missing fields, begin > end
  EXPECT_FALSE(ParseStatus(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4).ok());
  EXPECT_FALSE(ParseStatus(R"({"w":{"dtype":"F32","shape":[1]}})", 4).ok());
  EXPECT_FALSE(ParseStatus(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", 4).ok());
  // header length beyond the file
  auto bytes = Build("{}", 0);
  bytes[0] = 200;
  EXPECT_FALSE(SafetensorsFile::Parse(MappedFile::FromBytes(bytes, "t")).ok());
  EXPECT_FALSE(SafetensorsFile::Parse(MappedFile::FromBytes({1, 2, 3}, "t")).ok());
}

TEST(SafetensorsFileTest, ListsTensorsOfOtherDtypesWithoutLoadingThem) {
  auto st = SafetensorsFile::Parse(
      MappedFile::FromBytes(Build(R"({"ids":{"dtype":"I64","shape":[1,2],"data_offsets":[0,16]},)"
                                  R"("w":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
                                  24),
                            "t.safetensors"));
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->Find("ids"), nullptr);
  ASSERT_NE(st->Find("w"), nullptr);
  EXPECT_EQ(st->tensors().size(), 1u);
  EXPECT_EQ(st->other_dtypes().at("ids"), "I64");
}

}  // namespace
}  // namespace radixserve::model

// GgufFile: parses the real stories260K file; rejects malformed input (every truncation, bad
// magic and version, out-of-bounds, misaligned and overlapping tensors) with an error naming
// the file, never a crash.
#include "model/gguf_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace radixserve::model {
namespace {

const std::string kStories =
    std::string(RADIX_SHARED_DIR) + "/models/stories260K/gguf/stories260K.gguf";

// Minimal GGUF writer for hand-built test files.
class GgufBuilder {
 public:
  explicit GgufBuilder(uint32_t version = 3) {
    Raw("GGUF", 4);
    Put<uint32_t>(version);
    counts_at_ = bytes_.size();
    Put<uint64_t>(0);
    Put<uint64_t>(0);
  }
  template <typename T>
  void Put(T v) {
    Raw(&v, sizeof(v));
  }
  void Raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  void Str(const std::string& s) {
    Put<uint64_t>(s.size());
    Raw(s.data(), s.size());
  }
  void KvU32(const std::string& key, uint32_t v) {
    Str(key);
    Put<uint32_t>(4);
    Put<uint32_t>(v);
    ++kv_;
  }
  void KvString(const std::string& key, const std::string& v) {
    Str(key);
    Put<uint32_t>(8);
    Str(v);
    ++kv_;
  }
  // F32 tensor info of shape {rows, cols} (written innermost first).
  void Tensor(const std::string& name, uint64_t cols, uint64_t rows, uint64_t offset,
              uint32_t type = 0) {
    Str(name);
    Put<uint32_t>(2);
    Put<uint64_t>(cols);
    Put<uint64_t>(rows);
    Put<uint32_t>(type);
    Put<uint64_t>(offset);
    ++tensors_;
  }
  // Pads to 32 and appends n data bytes.
  std::vector<uint8_t> Finish(size_t data_bytes) {
    std::memcpy(bytes_.data() + counts_at_, &tensors_, 8);
    std::memcpy(bytes_.data() + counts_at_ + 8, &kv_, 8);
    while (bytes_.size() % 32 != 0) bytes_.push_back(0);
    bytes_.resize(bytes_.size() + data_bytes, 0x3F);
    return bytes_;
  }

 private:
  std::vector<uint8_t> bytes_;
  size_t counts_at_ = 0;
  uint64_t kv_ = 0, tensors_ = 0;
};

Expected<GgufFile> ParseBytes(std::vector<uint8_t> bytes) {
  return GgufFile::Parse(MappedFile::FromBytes(std::move(bytes), "test.gguf"));
}

std::vector<uint8_t> ValidFile() {
  GgufBuilder b;
  b.KvString("general.architecture", "llama");
  b.KvU32("llama.block_count", 2);
  b.Tensor("a.weight", 4, 2, 0);
  b.Tensor("b.weight", 8, 1, 32);
  return b.Finish(64);
}

TEST(GgufFileTest, ParsesStories260K) {
  auto gguf = GgufFile::Open(kStories, true);
  ASSERT_TRUE(gguf.ok()) << gguf.status().message();
  EXPECT_EQ(gguf->version(), 3u);
  EXPECT_EQ(*gguf->GetString("general.architecture").value(), "llama");
  EXPECT_EQ(*gguf->GetInt("llama.block_count").value(), 5);
  EXPECT_EQ(*gguf->GetInt("llama.embedding_length").value(), 64);
  const GgufTensorInfo* embd = gguf->FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(embd->format, kernels::WeightFormat::kF32);
  EXPECT_EQ(gguf->Find("tokenizer.ggml.tokens")->array_length, 512u);
}

TEST(GgufFileTest, ParsesHandBuiltFile) {
  auto gguf = ParseBytes(ValidFile());
  ASSERT_TRUE(gguf.ok()) << gguf.status().message();
  ASSERT_EQ(gguf->tensors().size(), 2u);
  EXPECT_EQ(gguf->FindTensor("b.weight")->shape, (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(gguf->FindTensor("b.weight")->bytes, 32);
  auto bad_type = gguf->GetString("llama.block_count");
  EXPECT_FALSE(bad_type.ok());
}

TEST(GgufFileTest, EveryTruncationIsAnError) {
  const auto full = ValidFile();
  for (size_t len = 0; len < full.size(); ++len) {
    auto gguf =
        ParseBytes(std::vector<uint8_t>(full.begin(), full.begin() + static_cast<long>(len)));
    ASSERT_FALSE(gguf.ok()) << "length " << len;
    EXPECT_NE(gguf.status().message().find("test.gguf"), std::string::npos);
  }
}

TEST(GgufFileTest, RejectsBadHeaders) {
  auto bytes = ValidFile();
  bytes[0] = 'X';
  EXPECT_EQ(ParseBytes(bytes).status().code(), StatusCode::kDataLoss);
  GgufBuilder v1(1);
  EXPECT_EQ(ParseBytes(v1.Finish(0)).status().code(), StatusCode::kUnsupported);
}

TEST(GgufFileTest, RejectsBadTensors) {
  {  // data past the end
    GgufBuilder b;
    b.Tensor("big.weight", 64, 64, 0);
    auto s = ParseBytes(b.Finish(100)).status();
    EXPECT_EQ(s.code(), StatusCode::kDataLoss);
    EXPECT_NE(s.message().find("big.weight"), std::string::npos) << s.message();
  }
  {  // overlap
    GgufBuilder b;
    b.Tensor("x", 16, 1, 0);
    b.Tensor("y", 16, 1, 32);
    auto s = ParseBytes(b.Finish(128)).status();
    EXPECT_NE(s.message().find("overlap"), std::string::npos) << s.message();
  }
  {  // misaligned
    GgufBuilder b;
    b.Tensor("x", 4, 1, 4);
    EXPECT_FALSE(ParseBytes(b.Finish(64)).ok());
  }
  {  // unknown ggml type
    GgufBuilder b;
    b.Tensor("x", 32, 1, 0, 99);
    auto s = ParseBytes(b.Finish(64)).status();
    EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  }
  {  // Q4_0 row not a whole number of blocks
    GgufBuilder b;
    b.Tensor("x", 33, 1, 0, 2);
    EXPECT_FALSE(ParseBytes(b.Finish(64)).ok());
  }
  {  // dimension product overflows
    GgufBuilder b;
    b.Tensor("x", 1ull << 40, 1ull << 40, 0);
    EXPECT_FALSE(ParseBytes(b.Finish(64)).ok());
  }
  {  // duplicate names
    GgufBuilder b;
    b.Tensor("x", 4, 1, 0);
    b.Tensor("x", 4, 1, 32);
    EXPECT_FALSE(ParseBytes(b.Finish(64)).ok());
  }
}

TEST(GgufFileTest, RejectsHugeCounts) {
  GgufBuilder b;
  b.Str("key");
  b.Put<uint32_t>(9);  // array
  b.Put<uint32_t>(8);  // of strings
  b.Put<uint64_t>(1ull << 60);
  auto bytes = b.Finish(0);
  bytes[16] = 1;  // kv count = 1
  EXPECT_EQ(ParseBytes(bytes).status().code(), StatusCode::kDataLoss);
}

TEST(GgufFileTest, MissingFileIsNotFound) {
  EXPECT_EQ(GgufFile::Open("/nonexistent/x.gguf", true).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace radixserve::model

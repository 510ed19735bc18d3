#include "model/pooling.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

namespace radixserve::model {
namespace {

namespace fs = std::filesystem;

// hidden: 2 sequences, dim 2: lengths 3 and 1.
const std::vector<float> kHidden = {1, 2, 3, 4, 5, 6, /* second */ 3, 4};
const std::vector<int64_t> kLengths = {3, 1};

std::vector<float> RunPool(PoolingConfig config) {
  std::vector<float> out(4);
  Pool(config, kHidden.data(), 2, kLengths, out.data());
  return out;
}

TEST(PoolingTest, ModesPickTheDeclaredTokens) {
  EXPECT_EQ(RunPool({PoolingMode::kCls, false}), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(RunPool({PoolingMode::kLastToken, false}), (std::vector<float>{5, 6, 3, 4}));
  EXPECT_EQ(RunPool({PoolingMode::kMean, false}), (std::vector<float>{3, 4, 3, 4}));
  const std::vector<float> n = RunPool({PoolingMode::kMean, true});
  EXPECT_FLOAT_EQ(n[0], 0.6f);
  EXPECT_FLOAT_EQ(n[1], 0.8f);
  EXPECT_FLOAT_EQ(n[2], 0.6f);
}

class PoolingConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pooling_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_ / "1_Pooling");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const fs::path& rel, const std::string& text) { std::ofstream(dir_ / rel) << text; }
  void WriteModules(bool normalize) {
    Write("modules.json",
          std::string(R"([{"type":"sentence_transformers.models.Transformer","path":""},)") +
              R"({"type":"sentence_transformers.models.Pooling","path":"1_Pooling"})" +
              (normalize ? R"(,{"type":"sentence_transformers.models.Normalize","path":"2_N"}])"
                         : "]"));
  }
  fs::path dir_;
};

TEST_F(PoolingConfigTest, ReadsModeAndNormalize) {
  WriteModules(true);
  Write("1_Pooling/config.json",
        R"({"pooling_mode_mean_tokens":true,"pooling_mode_cls_token":false})");
  auto c = LoadPoolingConfig(dir_.string(), {});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->mode, PoolingMode::kMean);
  EXPECT_TRUE(c->normalize);
  WriteModules(false);
  Write("1_Pooling/config.json", R"({"pooling_mode_lasttoken":true})");
  c = LoadPoolingConfig(dir_.string(), {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->mode, PoolingMode::kLastToken);
  EXPECT_FALSE(c->normalize);
}

// sentence-transformers >= 5 files: module classes under new packages, one pooling_mode string.
// A folder with modules.json normalizes only when it lists a Normalize module, whatever the
// fallback says.
TEST_F(PoolingConfigTest, ReadsTheNewerSentenceTransformersFormat) {
  Write("modules.json",
        R"([{"type":"sentence_transformers.base.modules.transformer.Transformer","path":""},)"
        R"({"type":"sentence_transformers.sentence_transformer.modules.pooling.Pooling",)"
        R"("path":"1_Pooling"}])");
  Write("1_Pooling/config.json", R"({"pooling_mode":"lasttoken","include_prompt":true})");
  auto c = LoadPoolingConfig(dir_.string(), {PoolingMode::kCls, true});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->mode, PoolingMode::kLastToken);
  EXPECT_FALSE(c->normalize);
  Write("1_Pooling/config.json", R"({"pooling_mode":"mean"})");
  EXPECT_EQ(LoadPoolingConfig(dir_.string(), {})->mode, PoolingMode::kMean);
  Write("1_Pooling/config.json", R"({"pooling_mode":"max"})");
  EXPECT_EQ(LoadPoolingConfig(dir_.string(), {}).status().code(), StatusCode::kUnsupported);
}

TEST_F(PoolingConfigTest, NoModulesFileGivesTheFallback) {
  auto c = LoadPoolingConfig(dir_.string(), {PoolingMode::kLastToken, true});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->mode, PoolingMode::kLastToken);
  EXPECT_TRUE(c->normalize);
}

TEST_F(PoolingConfigTest, RejectsModesItCannotCompute) {
  WriteModules(false);
  Write("1_Pooling/config.json", R"({"pooling_mode_max_tokens":true})");
  auto c = LoadPoolingConfig(dir_.string(), {});
  EXPECT_EQ(c.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(c.status().message().find("pooling_mode_max_tokens"), std::string::npos);
  Write("1_Pooling/config.json",
        R"({"pooling_mode_mean_tokens":true,"pooling_mode_cls_token":true})");
  EXPECT_EQ(LoadPoolingConfig(dir_.string(), {}).status().code(), StatusCode::kUnsupported);
  Write("modules.json", R"([{"type":"sentence_transformers.models.Dense","path":"2_Dense"}])");
  EXPECT_EQ(LoadPoolingConfig(dir_.string(), {}).status().code(), StatusCode::kUnsupported);
  Write("modules.json", "{not json");
  EXPECT_EQ(LoadPoolingConfig(dir_.string(), {}).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace radixserve::model

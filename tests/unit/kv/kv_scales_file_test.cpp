// SGLang's --quantization-param-path JSON (kv_scales_file.h): the documented format loads; every
// way it can disagree with the model or the format is refused with a message naming the flag.
#include "kv/kv_scales_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <unistd.h>

namespace radixserve::kv {
namespace {

// ctest runs each test in its own process, two at a time: the process id keeps one test's files
// apart from the other's (a counter alone gave both the same names).
std::string WriteTemp(const std::string& text) {
  static int counter = 0;
  const std::string path = ::testing::TempDir() + "kv_scales_" + std::to_string(::getpid()) + "_" +
                           std::to_string(counter++) + ".json";
  std::ofstream(path) << text;
  return path;
}

std::string Doc(const std::string& dtype, const std::string& layers,
                const std::string& model_type = "llama") {
  return R"({"model_type": ")" + model_type + R"(", "kv_cache": {"dtype": ")" + dtype +
         R"(", "scaling_factor": {"0": )" + layers + "}}}";
}

TEST(KvScalesFileTest, LoadsOneFactorPerLayerForKAndV) {
  const std::string path = WriteTemp(Doc("float8_e4m3fn", R"({"1": 0.25, "0": 0.5, "2": 1.5})"));
  Expected<KvScales> scales = LoadKvScalesFile(path, 3, "llama");
  ASSERT_TRUE(scales.ok()) << scales.status().message();
  EXPECT_EQ(scales->k, (std::vector<float>{0.5f, 0.25f, 1.5f}));
  EXPECT_EQ(scales->v, scales->k);
  EXPECT_EQ(scales->k_at(1), 0.25f);
  EXPECT_EQ(KvScales{}.k_at(7), 1.0f);
  std::remove(path.c_str());
}

TEST(KvScalesFileTest, RefusesFilesThatDoNotMatch) {
  struct Bad {
    std::string text;
    std::string why;
  };
  const Bad cases[] = {
      {"not json", "not a JSON object"},
      {Doc("float8_e5m2", R"({"0": 1, "1": 1})"), "float8_e4m3fn"},
      {Doc("float8_e4m3fn", R"({"0": 1})"), "layer 1"},
      {Doc("float8_e4m3fn", R"({"0": 1, "1": -2})"), "positive"},
      {Doc("float8_e4m3fn", R"({"0": 1, "1": 1, "5": 1})"), "'5'"},
      {Doc("float8_e4m3fn", R"({"0": 1, "1": 1})", "qwen2"), "model type"},
      {R"({"kv_cache": {"dtype": "float8_e4m3fn", "scaling_factor": {"1": {"0": 1, "1": 1}}}})",
       "rank 0"},
  };
  for (const Bad& c : cases) {
    const std::string path = WriteTemp(c.text);
    Expected<KvScales> scales = LoadKvScalesFile(path, 2, "llama");
    ASSERT_FALSE(scales.ok()) << c.text;
    EXPECT_EQ(scales.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(scales.status().message().find("--quantization-param-path"), std::string::npos);
    EXPECT_NE(scales.status().message().find(c.why), std::string::npos)
        << scales.status().message();
    std::remove(path.c_str());
  }
  EXPECT_FALSE(LoadKvScalesFile("/nonexistent/scales.json", 2, "llama").ok());
}

}  // namespace
}  // namespace radixserve::kv

// ModelConfig from HF config.json and from GGUF metadata: the two stories260K forms must give the
// same config; overrides, rope scaling and bad values.
#include "model/model_config.h"

#include <gtest/gtest.h>

#include "model/gguf_file.h"
#include "model/model_loader.h"

namespace radixserve::model {
namespace {

const std::string kStories = std::string(RADIX_SHARED_DIR) + "/models/stories260K";

LoadOptions Options(const std::string& path, const std::string& load_format = "auto",
                    const std::string& dtype = "auto", const std::string& json_override = "") {
  LoadOptions o;
  o.model_path = path;
  o.load_format = load_format;
  o.dtype = dtype;
  o.json_override = json_override;
  return o;
}

TEST(ModelConfigTest, HfAndGgufFormsAgree) {
  auto hf = LoadModelConfig(Options(kStories + "/hf"));
  ASSERT_TRUE(hf.ok()) << hf.status().message();
  auto gg = LoadModelConfig(Options(kStories + "/gguf/stories260K.gguf"));
  ASSERT_TRUE(gg.ok()) << gg.status().message();
  for (const ModelConfig* c : {&hf.value(), &gg.value()}) {
    EXPECT_EQ(c->architecture, "LlamaForCausalLM");
    EXPECT_EQ(c->hidden_size, 64);
    EXPECT_EQ(c->intermediate_size, 172);
    EXPECT_EQ(c->num_layers, 5);
    EXPECT_EQ(c->num_heads, 8);
    EXPECT_EQ(c->num_kv_heads, 4);
    EXPECT_EQ(c->head_dim, 8);
    EXPECT_EQ(c->rotary_dim, 8);
    EXPECT_EQ(c->vocab_size, 512);
    EXPECT_EQ(c->context_length, 512);
    EXPECT_NEAR(c->rms_norm_eps, 1e-5, 1e-12);
    EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
    EXPECT_TRUE(c->tie_word_embeddings);
    EXPECT_EQ(c->bos_token_id, 1);
    EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{2}));
  }
}

TEST(ModelConfigTest, OverridesAndContextLength) {
  LoadOptions o = Options(kStories + "/hf", "auto", "auto", R"({"rope_theta": 500.0})");
  o.context_length = 300;
  auto c = LoadModelConfig(o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_DOUBLE_EQ(c->rope_theta, 500.0);
  EXPECT_EQ(c->context_length, 300);
  EXPECT_FALSE(LoadModelConfig(Options(kStories + "/hf", "auto", "auto", "[1]")).ok());
  EXPECT_EQ(LoadModelConfig(Options(kStories + "/hf", "pt")).status().code(),
            StatusCode::kUnsupported);
  EXPECT_FALSE(LoadModelConfig(Options(kStories + "/hf", "auto", "float8")).ok());
  EXPECT_EQ(LoadModelConfig(Options("/nonexistent")).status().code(), StatusCode::kNotFound);
}

TEST(ModelConfigTest, ParsesRopeScalingAndGeneration) {
  nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                           {"hidden_size", 128},
                           {"intermediate_size", 256},
                           {"num_hidden_layers", 2},
                           {"num_attention_heads", 4},
                           {"num_key_value_heads", 2},
                           {"vocab_size", 100},
                           {"rope_theta", 500000.0},
                           {"rope_scaling",
                            {{"rope_type", "llama3"},
                             {"factor", 32.0},
                             {"low_freq_factor", 1.0},
                             {"high_freq_factor", 4.0},
                             {"original_max_position_embeddings", 8192}}},
                           {"eos_token_id", {5, 6}}};
  nlohmann::json generation = {{"eos_token_id", 7}, {"temperature", 0.6}, {"top_p", 0.9}};
  auto c = ParseModelConfig(config, &generation, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->rope_scaling.type, kernels::RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 32.0);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{5, 6, 7}));
  EXPECT_DOUBLE_EQ(*c->temperature, 0.6);

  config["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  EXPECT_EQ(ParseModelConfig(config, nullptr, "c").status().code(), StatusCode::kUnsupported);
  config.erase("rope_scaling");
  config["num_key_value_heads"] = 3;
  EXPECT_FALSE(ParseModelConfig(config, nullptr, "c").ok());
  config["num_key_value_heads"] = "two";
  EXPECT_FALSE(ParseModelConfig(config, nullptr, "c").ok());
}

TEST(ModelConfigTest, UnsupportedArchitectureIsAnError) {
  auto model = LoadModel(
      Options(kStories + "/hf", "auto", "auto", R"({"architectures": ["FancyForCausalLM"]})"));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(model.status().message().find("FancyForCausalLM"), std::string::npos);
}

}  // namespace
}  // namespace radixserve::model

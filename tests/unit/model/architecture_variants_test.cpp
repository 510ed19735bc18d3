// Qwen2 (QKV bias), Qwen3 (QK-norm) and Gemma 3 build from an HF config with dummy weights and
// give finite logits that do not depend on how the prompt is chunked. (Their numerics against
// llama.cpp are covered for Gemma 3 by tests/oracle/model; no Qwen checkpoint is available.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "model/model_loader.h"

namespace radixserve::model {
namespace {

std::string WriteConfig(const std::string& name, const nlohmann::json& config) {
  const auto dir = std::filesystem::temp_directory_path() / ("radix_variant_" + name);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump();
  return dir.string();
}

nlohmann::json BaseConfig(const std::string& arch) {
  return {{"architectures", {arch}}, {"hidden_size", 64},        {"intermediate_size", 96},
          {"num_hidden_layers", 3},  {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"head_dim", 16},          {"vocab_size", 50},         {"max_position_embeddings", 64},
          {"rms_norm_eps", 1e-6},    {"rope_theta", 10000.0},    {"tie_word_embeddings", true}};
}

std::vector<float> Run(const CausalLM& lm, const std::vector<int32_t>& tokens, int64_t chunk) {
  const ModelConfig& c = lm.config();
  const int64_t n = static_cast<int64_t>(tokens.size());
  KvCacheBuffers kv(c.num_layers, n, c.num_kv_heads, c.head_dim);
  std::vector<int32_t> slots(static_cast<size_t>(n));
  std::iota(slots.begin(), slots.end(), 0);
  std::vector<float> logits(static_cast<size_t>(n * c.vocab_size));
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    ForwardBatch batch;
    for (int64_t i = 0; i < len; ++i) {
      batch.token_ids.push_back(tokens[static_cast<size_t>(start + i)]);
      batch.positions.push_back(start + i);
      batch.logit_indices.push_back(i);
    }
    batch.sequences.push_back(
        {start, len, std::span<const int32_t>(slots.data(), static_cast<size_t>(start + len))});
    EXPECT_TRUE(lm.Forward(batch, kv.view(), nullptr, logits.data() + start * c.vocab_size).ok());
  }
  return logits;
}

void CheckVariant(const std::string& name, const nlohmann::json& config) {
  LoadOptions options;
  options.model_path = WriteConfig(name, config);
  options.load_format = "dummy";
  options.random_seed = 11;
  auto lm = LoadModel(options);
  ASSERT_TRUE(lm.ok()) << lm.status().message();
  EXPECT_EQ(lm.value()->config().architecture, config["architectures"][0].get<std::string>());
  const std::vector<int32_t> tokens{1, 7, 3, 49, 0, 22, 5, 5, 17, 30, 2};
  auto whole = Run(**lm, tokens, 11);
  auto chunked = Run(**lm, tokens, 4);
  for (size_t i = 0; i < whole.size(); ++i) {
    ASSERT_TRUE(std::isfinite(whole[i]));
    EXPECT_NEAR(whole[i], chunked[i], 1e-5);
  }
}

TEST(ArchitectureVariantsTest, Qwen2WithBias) {
  auto c = BaseConfig("Qwen2ForCausalLM");
  CheckVariant("qwen2", c);
}

TEST(ArchitectureVariantsTest, Qwen3WithQkNorm) {
  CheckVariant("qwen3", BaseConfig("Qwen3ForCausalLM"));
}

TEST(ArchitectureVariantsTest, Gemma3SlidingWindow) {
  auto c = BaseConfig("Gemma3ForCausalLM");
  c["model_type"] = "gemma3_text";
  c["hidden_activation"] = "gelu_pytorch_tanh";
  c["sliding_window"] = 4;  // shorter than the prompt, so the window matters
  c["layer_types"] = {"sliding_attention", "sliding_attention", "full_attention"};
  c["query_pre_attn_scalar"] = 16;
  CheckVariant("gemma3", c);
}

}  // namespace
}  // namespace radixserve::model

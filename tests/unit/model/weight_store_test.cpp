// WeightStore: HF parameter names map to the canonical (GGUF) names, per architecture; lookups
// check shapes and name the file and tensor on failure.
#include "model/weight_store.h"

#include <gtest/gtest.h>

namespace radixserve::model {
namespace {

const std::string kStories = std::string(RADIX_SHARED_DIR) + "/models/stories260K";

TEST(WeightStoreTest, CanonicalNames) {
  EXPECT_EQ(CanonicalWeightName("model.embed_tokens.weight", "llama"), "token_embd.weight");
  EXPECT_EQ(CanonicalWeightName("lm_head.weight", "llama"), "output.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.12.self_attn.q_proj.bias", "qwen2"),
            "blk.12.attn_q.bias");
  EXPECT_EQ(CanonicalWeightName("model.layers.0.self_attn.k_norm.weight", "qwen3"),
            "blk.0.attn_k_norm.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.3.post_attention_layernorm.weight", "llama"),
            "blk.3.ffn_norm.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.3.post_attention_layernorm.weight", "gemma3_text"),
            "blk.3.post_attention_norm.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.3.pre_feedforward_layernorm.weight", "gemma3_text"),
            "blk.3.ffn_norm.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.x.mlp.up_proj.weight", "llama"), "");
  EXPECT_EQ(CanonicalWeightName("model.rotary_emb.inv_freq", "llama"), "");
  // Qwen3-MoE: the router and per-expert projections (RequireExperts reads them back).
  EXPECT_EQ(CanonicalWeightName("model.layers.2.mlp.gate.weight", "qwen3_moe"),
            "blk.2.ffn_gate_inp.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.2.mlp.experts.17.gate_proj.weight", "qwen3_moe"),
            "blk.2.ffn_gate_exps.17.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.2.mlp.experts.0.down_proj.weight", "qwen3_moe"),
            "blk.2.ffn_down_exps.0.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.2.mlp.experts.x.up_proj.weight", "qwen3_moe"), "");
  EXPECT_EQ(CanonicalWeightName("model.layers.2.mlp.experts.1.w1.weight", "qwen3_moe"), "");
  EXPECT_EQ(CanonicalWeightName("model.layers.1.mlp.shared_expert_gate.weight", "qwen2_moe"),
            "blk.1.ffn_gate_inp_shexp.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.1.mlp.shared_expert.up_proj.weight", "qwen2_moe"),
            "blk.1.ffn_up_shexp.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.5.block_sparse_moe.gate.weight", "mixtral"),
            "blk.5.ffn_gate_inp.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.5.block_sparse_moe.experts.3.w2.weight", "mixtral"),
            "blk.5.ffn_down_exps.3.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.5.block_sparse_moe.experts.3.w3.weight", "mixtral"),
            "blk.5.ffn_up_exps.3.weight");
  // gpt-oss: bare sinks, the router with its bias, the MLP's input norm under its GGUF name; the
  // stacked experts go through ConvertGptOssExperts instead.
  EXPECT_EQ(CanonicalWeightName("model.layers.4.self_attn.sinks", "gpt_oss"),
            "blk.4.attn_sinks.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.4.mlp.router.bias", "gpt_oss"),
            "blk.4.ffn_gate_inp.bias");
  EXPECT_EQ(CanonicalWeightName("model.layers.4.post_attention_layernorm.weight", "gpt_oss"),
            "blk.4.post_attention_norm.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.4.self_attn.o_proj.bias", "gpt_oss"),
            "blk.4.attn_output.bias");
  EXPECT_EQ(CanonicalWeightName("model.layers.4.mlp.experts.gate_up_proj_blocks", "gpt_oss"), "");
  EXPECT_EQ(CanonicalWeightName("model.layers.4.self_attn.sinks", "llama"), "");
}

TEST(WeightStoreTest, ShapeMismatchNamesFileAndTensor) {
  auto file = SafetensorsFile::Open(kStories + "/hf/model.safetensors", true);
  ASSERT_TRUE(file.ok());
  std::vector<SafetensorsFile> files;
  files.push_back(std::move(file).value());
  auto store = WeightStore::FromSafetensors(std::move(files), "llama");
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto good = store.value()->Require("token_embd.weight", {512, 64});
  EXPECT_TRUE(good.ok());
  auto bad = store.value()->Require("token_embd.weight", {64, 512});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("model.safetensors"), std::string::npos);
  EXPECT_NE(bad.status().message().find("token_embd.weight"), std::string::npos);
  auto missing = store.value()->Require("blk.9.attn_q.weight", {64, 64});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store.value()->rope_layout(), kernels::RopeLayout::kRotateHalf);
}

TEST(WeightStoreTest, GgufLlamaUsesInterleavedRope) {
  auto gguf = GgufFile::Open(kStories + "/gguf/stories260K.gguf", true);
  ASSERT_TRUE(gguf.ok());
  auto store = WeightStore::FromGguf(std::move(gguf).value());
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(store.value()->rope_layout(), kernels::RopeLayout::kInterleaved);
  EXPECT_TRUE(store.value()->from_gguf());
}

}  // namespace
}  // namespace radixserve::model

// LlamaModel on stories260K: the GGUF and HF forms give the same logits; a sequence's logits do
// not change when it runs alone, split into prefill chunks, or inside a batch of 16 mixed
// prefill/decode sequences with scattered KV slots, for the dense model and a Qwen3-MoE with
// random weights (also over random batches); dummy weights load and run.
#include "model/llama_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "model/model_loader.h"

namespace radixserve::model {
namespace {

const std::string kStories = std::string(RADIX_SHARED_DIR) + "/models/stories260K";

std::vector<int32_t> Tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> out{1};
  while (static_cast<int>(out.size()) < n) out.push_back(static_cast<int32_t>(3 + rng() % 500));
  return out;
}

// One sequence's progress through a multi-step test.
struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> slots;
  int64_t done = 0;
};

class Runner {
 public:
  explicit Runner(const CausalLM& lm, int64_t slots)
      : lm_(lm),
        kv_(lm.config().num_layers, slots, lm.config().num_kv_heads, lm.config().head_dim),
        pool_(2) {}

  // One step: each (seq, extend) pair extends that sequence; returns logits of every new token.
  std::vector<std::vector<float>> Step(std::vector<std::pair<Seq*, int64_t>> work) {
    ForwardBatch batch;
    for (auto& [seq, len] : work) {
      for (int64_t i = 0; i < len; ++i) {
        batch.logit_indices.push_back(batch.num_tokens());
        batch.token_ids.push_back(seq->tokens[static_cast<size_t>(seq->done + i)]);
        batch.positions.push_back(seq->done + i);
      }
      batch.sequences.push_back({seq->done, len, std::span<const int32_t>(seq->slots)});
    }
    const int64_t vocab = lm_.config().vocab_size;
    std::vector<float> logits(batch.logit_indices.size() * static_cast<size_t>(vocab));
    Status s = lm_.Forward(batch, kv_.view(), &pool_, logits.data());
    EXPECT_TRUE(s.ok()) << s.message();
    std::vector<std::vector<float>> rows;
    for (size_t r = 0; r < batch.logit_indices.size(); ++r) {
      rows.emplace_back(logits.begin() + static_cast<long>(r * vocab),
                        logits.begin() + static_cast<long>((r + 1) * vocab));
    }
    for (auto& [seq, len] : work) seq->done += len;
    return rows;
  }

 private:
  const CausalLM& lm_;
  KvCacheBuffers kv_;
  ThreadPool pool_;
};

float MaxDiff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    for (size_t j = 0; j < a[i].size(); ++j) m = std::max(m, std::fabs(a[i][j] - b[i][j]));
  }
  return m;
}

LoadOptions Options(const std::string& path) {
  LoadOptions o;
  o.model_path = path;
  return o;
}

std::unique_ptr<CausalLM> Load(const std::string& path) {
  auto m = LoadModel(Options(path));
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(m).value() : nullptr;
}

TEST(LlamaModelTest, GgufAndHfFormsAgree) {
  auto gguf = Load(kStories + "/gguf/stories260K.gguf");
  auto hf = Load(kStories + "/hf");
  ASSERT_TRUE(gguf && hf);
  Seq a{Tokens(64, 1), {}, 0}, b = a;
  a.slots.resize(64);
  std::iota(a.slots.begin(), a.slots.end(), 0);
  b.slots = a.slots;
  Runner ra(*gguf, 64), rb(*hf, 64);
  auto la = ra.Step({{&a, 64}});
  auto lb = rb.Step({{&b, 64}});
  EXPECT_LT(MaxDiff(la, lb), 1e-4f);
}

TEST(LlamaModelTest, KnownGreedyContinuation) {
  // stories260K README: "Once upon a time" -> [1, 403, 407, 261, 378] continues with ", there".
  auto lm = Load(kStories + "/gguf/stories260K.gguf");
  ASSERT_TRUE(lm);
  Seq s{{1, 403, 407, 261, 378}, std::vector<int32_t>(40), 0};
  std::iota(s.slots.begin(), s.slots.end(), 0);
  Runner r(*lm, 40);
  auto rows = r.Step({{&s, 5}});
  const auto& last = rows.back();
  EXPECT_EQ(std::max_element(last.begin(), last.end()) - last.begin(), 432);  // ","
}

// A sequence alone, chunked, and inside a batch of 16 mixed prefill/decode sequences.
void ExpectBatchInvariant(const CausalLM& lm_ref) {
  const CausalLM* lm = &lm_ref;
  constexpr int64_t kLen = 48, kPool = 1024;
  std::mt19937 rng(99);
  std::vector<int32_t> free_slots(kPool);
  std::iota(free_slots.begin(), free_slots.end(), 0);
  std::shuffle(free_slots.begin(), free_slots.end(), rng);  // scattered, page-like slots
  auto take = [&](int64_t n) {
    std::vector<int32_t> out(free_slots.end() - n, free_slots.end());
    free_slots.resize(free_slots.size() - static_cast<size_t>(n));
    return out;
  };

  // Alone, one prefill.
  Seq alone{Tokens(kLen, 5), take(kLen), 0};
  Runner r(*lm, kPool);
  auto expect = r.Step({{&alone, kLen}});

  // Chunked: 7 + 13 + 28.
  Seq chunked{alone.tokens, take(kLen), 0};
  std::vector<std::vector<float>> got;
  for (int64_t len : {7, 13, 28}) {
    auto rows = r.Step({{&chunked, len}});
    got.insert(got.end(), rows.begin(), rows.end());
  }
  EXPECT_LT(MaxDiff(got, expect), 1e-5f);

  // In a batch of 16: 15 others prefill first, then the target prefills its first 20 tokens
  // while others decode or extend, then its last 28 tokens next to more decodes.
  std::vector<Seq> others;
  for (int i = 0; i < 15; ++i) others.push_back({Tokens(40, 100 + i), take(40), 0});
  Seq target{alone.tokens, take(kLen), 0};
  std::vector<std::pair<Seq*, int64_t>> step;
  for (int i = 0; i < 15; ++i) step.push_back({&others[i], 3 + i});
  r.Step(step);
  step.clear();
  for (int i = 0; i < 8; ++i) step.push_back({&others[i], 1});
  step.push_back({&target, 20});
  for (int i = 8; i < 15; ++i) step.push_back({&others[i], i % 2 ? 1 : 5});
  auto rows1 = r.Step(step);
  step.clear();
  for (int i = 14; i >= 0; --i) step.push_back({&others[i], 1});
  step.insert(step.begin() + 6, {&target, 28});
  auto rows2 = r.Step(step);
  // Pick the target's rows out of each step (its tokens follow the 8 decodes / 6 decodes).
  got.assign(rows1.begin() + 8, rows1.begin() + 28);
  got.insert(got.end(), rows2.begin() + 6, rows2.begin() + 34);
  EXPECT_LT(MaxDiff(got, expect), 1e-5f);
}

TEST(LlamaModelTest, BatchInvariance) {
  auto lm = Load(kStories + "/gguf/stories260K.gguf");
  ASSERT_TRUE(lm);
  ExpectBatchInvariant(*lm);
}

constexpr const char* kQwen3Moe =
    R"({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_experts": 8,
        "num_experts_per_tok": 2, "moe_intermediate_size": 32, "norm_topk_prob": true})";
constexpr const char* kQwen2Moe =
    R"({"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "num_experts": 8,
        "num_experts_per_tok": 3, "moe_intermediate_size": 16,
        "shared_expert_intermediate_size": 48})";
// stories260K's shape as DeepSeek-V2-Lite (multi-head latent attention without a Q LoRA, a
// leading dense layer, softmax routing with shared experts and a routed scale) and DeepSeek-V3
// (Q LoRA, sigmoid routing limited to the 2 best of 4 groups, renormalized).
constexpr const char* kDeepseekV2 =
    R"({"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
        "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
        "n_shared_experts": 2, "first_k_dense_replace": 1, "routed_scaling_factor": 1.5,
        "kv_lora_rank": 16, "q_lora_rank": null, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8,
        "v_head_dim": 8})";
constexpr const char* kDeepseekV3 =
    R"({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
        "n_shared_experts": 1, "first_k_dense_replace": 1, "routed_scaling_factor": 2.5,
        "scoring_func": "sigmoid", "topk_method": "noaux_tc", "n_group": 4, "topk_group": 2,
        "norm_topk_prob": true, "kv_lora_rank": 16, "q_lora_rank": 24, "qk_nope_head_dim": 8,
        "qk_rope_head_dim": 8, "v_head_dim": 12})";

// stories260K's shape as a Qwen3-MoE (8 experts, top-2) or a Qwen2-MoE (top-3 and a shared
// expert) with seeded random weights.
std::unique_ptr<CausalLM> LoadMoe(const char* override_json = kQwen3Moe,
                                  ExpertPlacementOptions placement = {}) {
  LoadOptions o = Options(kStories + "/hf");
  o.load_format = "dummy";
  o.random_seed = 11;
  o.json_override = override_json;
  o.expert_placement = std::move(placement);
  auto m = LoadModel(o);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(m).value() : nullptr;
}

TEST(LlamaModelTest, MoeBatchInvariance) {
  auto lm = LoadMoe();
  ASSERT_TRUE(lm);
  EXPECT_EQ(lm->config().num_experts, 8);
  ExpectBatchInvariant(*lm);
}

// Random batches: every round, sequences of random lengths run alone, then together in steps of
// random chunk sizes (prefill pieces next to single-token decodes, random subsets); each
// token's logits must be the ones it got alone.
void ExpectRandomBatchesInvariant(const CausalLM& lm_ref) {
  const CausalLM* lm = &lm_ref;
  std::mt19937 rng(7);
  constexpr int64_t kPool = 2048;
  for (int round = 0; round < 4; ++round) {
    Runner r(*lm, kPool);
    std::vector<int32_t> free_slots(kPool);
    std::iota(free_slots.begin(), free_slots.end(), 0);
    std::shuffle(free_slots.begin(), free_slots.end(), rng);
    auto take = [&](int64_t n) {
      std::vector<int32_t> out(free_slots.end() - n, free_slots.end());
      free_slots.resize(free_slots.size() - static_cast<size_t>(n));
      return out;
    };
    const int n_seqs = 3 + static_cast<int>(rng() % 6);
    std::vector<Seq> seqs;
    std::vector<std::vector<std::vector<float>>> alone, together(static_cast<size_t>(n_seqs));
    for (int i = 0; i < n_seqs; ++i) {
      const int len = 2 + static_cast<int>(rng() % 30);
      Seq solo{Tokens(len, 1000 * round + i), take(len), 0};
      alone.push_back(r.Step({{&solo, len}}));
      seqs.push_back({solo.tokens, take(len), 0});
    }
    for (;;) {
      std::vector<std::pair<Seq*, int64_t>> step;
      std::vector<int> who;
      for (int i = 0; i < n_seqs; ++i) {
        Seq& q = seqs[static_cast<size_t>(i)];
        const int64_t left = static_cast<int64_t>(q.tokens.size()) - q.done;
        if (left == 0 || rng() % 4 == 0) continue;
        const int64_t len = rng() % 2 ? 1 : 1 + static_cast<int64_t>(rng() % left);
        step.push_back({&q, std::min(len, left)});
        who.push_back(i);
      }
      if (step.empty()) {
        bool done = true;
        for (const Seq& q : seqs) done = done && q.done == static_cast<int64_t>(q.tokens.size());
        if (done) break;
        continue;
      }
      auto rows = r.Step(step);
      size_t row = 0;
      for (size_t j = 0; j < step.size(); ++j) {
        auto& out = together[static_cast<size_t>(who[j])];
        for (int64_t t = 0; t < step[j].second; ++t) out.push_back(rows[row++]);
      }
    }
    for (int i = 0; i < n_seqs; ++i) {
      EXPECT_LT(MaxDiff(together[static_cast<size_t>(i)], alone[static_cast<size_t>(i)]), 1e-5f)
          << "round " << round << " sequence " << i;
    }
  }
}

TEST(LlamaModelTest, MoeRandomBatchesAreInvariant) {
  for (const char* arch : {kQwen3Moe, kQwen2Moe, kDeepseekV2, kDeepseekV3}) {
    auto lm = LoadMoe(arch);
    ASSERT_TRUE(lm);
    ExpectRandomBatchesInvariant(*lm);
  }
}

// Redundant replicas, both dispatch rules and a rebalance every two passes (one layer per pass)
// leave every token's logits as the plain model computes them: a replica holds the same weights,
// and a token's sum runs over its own choices in its own order whichever slots computed them.
TEST(LlamaModelTest, MoeReplicasAndRebalancingKeepTheOutput) {
  for (const char* arch : {kQwen3Moe, kQwen2Moe, kDeepseekV3}) {
    auto plain = LoadMoe(arch);
    ASSERT_TRUE(plain);
    for (const ExpertDispatch dispatch : {ExpertDispatch::kStatic, ExpertDispatch::kDynamic}) {
      ExpertPlacementOptions options;
      options.redundant_experts = 4;
      options.dispatch = dispatch;
      options.rebalance = true;
      options.rebalance_every = 2;
      options.layers_per_chunk = 1;
      auto placed = LoadMoe(arch, options);
      ASSERT_TRUE(placed);
      Runner a(*plain, 512), b(*placed, 512);
      std::vector<Seq> sa, sb;
      for (int i = 0; i < 3; ++i) {
        std::vector<int32_t> slots(40);
        std::iota(slots.begin(), slots.end(), 40 * i);
        sa.push_back({Tokens(40, 50 + i), slots, 0});
        sb.push_back(sa.back());
      }
      for (int step = 0; step < 12; ++step) {
        std::vector<std::pair<Seq*, int64_t>> wa, wb;
        for (size_t i = 0; i < sa.size(); ++i) {
          const int64_t len = step == 0 ? 20 : 1;
          wa.push_back({&sa[i], len});
          wb.push_back({&sb[i], len});
        }
        EXPECT_LT(MaxDiff(a.Step(wa), b.Step(wb)), 1e-5f) << arch << " step " << step;
      }
    }
  }
}

TEST(LlamaModelTest, MoeInitialPlacementNeedsEveryLayer) {
  ExpertPlacementOptions options;
  options.redundant_experts = 3;  // 8 + 3 slots
  LoadOptions o = Options(kStories + "/hf");
  o.load_format = "dummy";
  o.json_override = kQwen3Moe;
  o.expert_placement = options;
  o.expert_placement.initial_map = {{0}};  // one layer given; the model has five
  const auto wrong_layers = LoadModel(o);
  ASSERT_FALSE(wrong_layers.ok());
  EXPECT_NE(wrong_layers.status().message().find("argument --init-expert-location: 1 layers"),
            std::string::npos)
      << wrong_layers.status().message();
}

TEST(LlamaModelTest, DeepseekGeometry) {
  auto lm = LoadMoe(kDeepseekV3);
  ASSERT_TRUE(lm);
  const ModelConfig& c = lm->config();
  // The cache row: the latent (kv_lora_rank) and the rotary key, one per token, values inside.
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 16 + 8);
  EXPECT_EQ(c.rotary_dim, 8);
  EXPECT_TRUE(c.kv_values_in_keys());
  EXPECT_EQ(c.first_dense_layers, 1);
  EXPECT_EQ(c.shared_expert_intermediate_size, 16);
  EXPECT_EQ(c.moe_gating, ModelConfig::MoeGating::kSigmoid);
  EXPECT_EQ(c.expert_groups, 4);
  // Multi-head latent attention takes LoRA adapters (test_lora_mla_oracle.py): a missing one is
  // reported as missing, not refused for the architecture.
  EXPECT_EQ(lm->LoadLora("/nonexistent", {}).status().code(), StatusCode::kNotFound);
}

TEST(LlamaModelTest, DeepseekConfigErrors) {
  LoadOptions o = Options(kStories + "/hf");
  o.load_format = "dummy";
  const std::string base =
      R"("architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
         "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
         "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8,
         "topk_method": "noaux_tc")";
  for (const char* bad : {R"("n_group": 3, "topk_group": 1)",  // 8 experts in 3 groups
                          R"("n_group": 4, "topk_group": 5)",  // more groups used than exist
                          R"("n_group": 8, "topk_group": 1)",  // 1 expert < top-2
                          R"("qk_rope_head_dim": 7)",          // odd rotary width
                          R"("routed_scaling_factor": 0)"}) {
    o.json_override = "{" + base + ", " + bad + "}";
    EXPECT_EQ(LoadModel(o).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  for (const char* unsupported :
       {R"("moe_layer_freq": 2)", R"("scoring_func": "tanh")", R"("topk_method": "random")"}) {
    o.json_override = "{" + base + ", " + unsupported + "}";
    EXPECT_EQ(LoadModel(o).status().code(), StatusCode::kUnsupported) << unsupported;
  }
}

TEST(LlamaModelTest, MoeConfigErrors) {
  LoadOptions o = Options(kStories + "/hf");
  o.load_format = "dummy";
  o.json_override = R"({"architectures": ["Qwen3MoeForCausalLM"], "num_experts": 8,
      "num_experts_per_tok": 9, "moe_intermediate_size": 32})";
  EXPECT_EQ(LoadModel(o).status().code(), StatusCode::kInvalidArgument);
  o.json_override = R"({"architectures": ["Qwen3MoeForCausalLM"], "num_experts": 8,
      "num_experts_per_tok": 2, "moe_intermediate_size": 32, "mlp_only_layers": [0]})";
  EXPECT_EQ(LoadModel(o).status().code(), StatusCode::kUnsupported);
  o.json_override = R"({"architectures": ["Qwen3MoeForCausalLM"]})";
  EXPECT_EQ(LoadModel(o).status().code(), StatusCode::kInvalidArgument);
  o.json_override = R"({"architectures": ["OlmoeForCausalLM"], "num_experts": 8,
      "num_experts_per_tok": 2, "clip_qkv": 8.0})";
  EXPECT_EQ(LoadModel(o).status().code(), StatusCode::kUnsupported);
  o.json_override = R"({"num_experts": 8, "num_experts_per_tok": 2})";  // LlamaForCausalLM
  EXPECT_EQ(LoadModel(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(LlamaModelTest, DummyWeightsRun) {
  for (const char* dtype : {"float32", "bfloat16"}) {
    LoadOptions o = Options(kStories + "/hf");
    o.load_format = "dummy";
    o.dtype = dtype;
    o.random_seed = 3;
    auto lm = LoadModel(o);
    ASSERT_TRUE(lm.ok()) << lm.status().message();
    Seq s{Tokens(9, 2), std::vector<int32_t>(9), 0};
    std::iota(s.slots.begin(), s.slots.end(), 0);
    Runner r(**lm, 9);
    for (const auto& row : r.Step({{&s, 9}})) {
      for (float v : row) ASSERT_TRUE(std::isfinite(v));
    }
  }
}

TEST(LlamaModelTest, BadTokenIsAnError) {
  auto lm = Load(kStories + "/hf");
  ASSERT_TRUE(lm);
  KvCacheBuffers kv(5, 4, 4, 8);
  std::vector<int32_t> slots{0};
  ForwardBatch batch{{600}, {0}, {{0, 1, std::span<const int32_t>(slots)}}, {0}, {}, {}};
  std::vector<float> logits(512);
  EXPECT_EQ(lm->Forward(batch, kv.view(), nullptr, logits.data()).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace radixserve::model

// DecoderStack through the stories260K model: Q/K/V and gate/up are fused at load; steps run
// concurrently from several threads on one shared model (engine replicas, each with its own
// pool and KV) give exactly the logits of the same steps run alone; a step after a larger one
// (reused, grown scratch) gives the same logits as in a fresh thread.
#include "model/decoder_stack.h"

#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "model/gguf_file.h"
#include "model/model_loader.h"
#include "model/weight_store.h"

namespace radixserve::model {
namespace {

const std::string kStoriesGguf =
    std::string(RADIX_SHARED_DIR) + "/models/stories260K/gguf/stories260K.gguf";

// Prefill of `n` tokens (seeded) then `decodes` single-token steps; returns the last logits.
std::vector<float> RunSequence(const CausalLM& lm, int n, int decodes, int seed) {
  const ModelConfig& c = lm.config();
  const int total = n + decodes;
  KvCacheBuffers kv(c.num_layers, total, c.num_kv_heads, c.head_dim);
  ThreadPool pool(1);
  std::vector<int32_t> slots(static_cast<size_t>(total));
  std::iota(slots.begin(), slots.end(), 0);
  std::vector<int32_t> tokens{1};
  for (int i = 1; i < total; ++i) tokens.push_back(3 + (i * 37 + seed * 11) % 500);
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  int64_t done = 0;
  {
    const int64_t len = n;
    ForwardBatch b;
    b.token_ids.assign(tokens.begin(), tokens.begin() + len);
    for (int64_t i = 0; i < len; ++i) b.positions.push_back(i);
    b.logit_indices = {len - 1};
    b.sequences.push_back(
        {0, len, std::span<const int32_t>(slots.data(), static_cast<size_t>(len))});
    EXPECT_TRUE(lm.Forward(b, kv.view(), &pool, logits.data()).ok());
    done = len;
  }
  for (int d = 0; d < decodes; ++d, ++done) {
    const std::span<const int32_t> seq_slots(slots.data(), static_cast<size_t>(done + 1));
    ForwardBatch b{
        {tokens[static_cast<size_t>(done)]}, {done}, {{done, 1, seq_slots}}, {0}, {}, {}};
    EXPECT_TRUE(lm.Forward(b, kv.view(), &pool, logits.data()).ok());
  }
  return logits;
}

std::unique_ptr<CausalLM> LoadStories() {
  LoadOptions o;
  o.model_path = kStoriesGguf;
  auto lm = LoadModel(o);
  EXPECT_TRUE(lm.ok()) << lm.status().message();
  return lm.ok() ? std::move(lm).value() : nullptr;
}

TEST(DecoderStackTest, FusesProjectionsOfOneFormat) {
  auto gguf = GgufFile::Open(kStoriesGguf, true);
  ASSERT_TRUE(gguf.ok()) << gguf.status().message();
  auto config_json = GgufConfigJson(*gguf);
  ASSERT_TRUE(config_json.ok());
  auto config = ParseModelConfig(*config_json, nullptr, kStoriesGguf);
  ASSERT_TRUE(config.ok());
  auto weights = WeightStore::FromGguf(std::move(gguf).value());
  ASSERT_TRUE(weights.ok());
  DecoderSpec spec;
  spec.tie_word_embeddings = true;
  spec.inv_freq =
      kernels::RopeInvFreq(config->rope_theta, static_cast<int>(config->rotary_dim), {});
  spec.attention = {static_cast<int>(config->num_heads), static_cast<int>(config->num_kv_heads),
                    static_cast<int>(config->head_dim), 0.35f, 0.0f};
  DecoderStack stack;
  ASSERT_TRUE(stack.Load(*config, spec, **weights).ok());
  EXPECT_EQ(stack.fused_qkv_layers(), config->num_layers);
  EXPECT_EQ(stack.fused_gate_up_layers(), config->num_layers);
}

TEST(DecoderStackTest, ConcurrentReplicasMatchSingleThread) {
  auto lm = LoadStories();
  ASSERT_TRUE(lm);
  std::vector<std::vector<float>> alone;
  for (int seed = 0; seed < 3; ++seed) alone.push_back(RunSequence(*lm, 40 + seed * 9, 12, seed));
  std::vector<std::vector<float>> concurrent(3);
  std::vector<std::thread> threads;
  for (int seed = 0; seed < 3; ++seed) {
    threads.emplace_back([&, seed] {
      for (int round = 0; round < 3; ++round)
        concurrent[static_cast<size_t>(seed)] = RunSequence(*lm, 40 + seed * 9, 12, seed);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < alone.size(); ++i) EXPECT_EQ(concurrent[i], alone[i]) << "replica " << i;
}

TEST(DecoderStackTest, SmallStepAfterLargeOneIsUnchanged) {
  auto lm = LoadStories();
  ASSERT_TRUE(lm);
  std::vector<float> fresh;
  std::thread([&] { fresh = RunSequence(*lm, 5, 3, 9); }).join();
  RunSequence(*lm, 300, 2, 4);  // grows this thread's scratch
  EXPECT_EQ(RunSequence(*lm, 5, 3, 9), fresh);
}

}  // namespace
}  // namespace radixserve::model

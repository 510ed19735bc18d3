// What a request's events carry: prompt logprobs (against log_softmax of the model's own logits
// computed without the engine), seeded sampling independent of the batch, stream cadence and
// prefill-only requests.
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC 12 false positive in std::string (bug 105329)

#include <gtest/gtest.h>

#include <cmath>

#include "engine_test_util.h"

namespace radixserve::engine {
namespace {

using testing::Collector;

std::vector<int32_t> Encode(const std::string& text) {
  std::vector<int32_t> ids;
  for (auto id : testing::LoadStories().tokenizer->Encode(text))
    ids.push_back(static_cast<int32_t>(id));
  return ids;
}

// log P(prompt[i] | prompt[:i]) for i >= 1, from one direct forward pass over the prompt.
std::vector<double> ReferencePromptLogprobs(const std::vector<int32_t>& prompt) {
  const model::CausalLM& lm = *testing::LoadStories().model;
  const model::ModelConfig& c = lm.config();
  const auto n = static_cast<int64_t>(prompt.size());
  model::KvCacheBuffers kv(c.num_layers, n + 2, c.num_kv_heads, c.head_dim);
  std::vector<int32_t> slots;
  for (int64_t i = 0; i < n; ++i) slots.push_back(static_cast<int32_t>(i + 1));
  model::ForwardBatch batch;
  batch.token_ids = prompt;
  for (int64_t i = 0; i < n; ++i) {
    batch.positions.push_back(i);
    batch.logit_indices.push_back(i);
  }
  batch.sequences.push_back(model::SequenceExtend{0, n, slots});
  std::vector<float> logits(static_cast<size_t>(n * c.vocab_size));
  RADIX_CHECK(lm.Forward(batch, kv.view(), testing::TestPool(), logits.data()).ok());
  std::vector<double> out(prompt.size(), std::nan(""));
  for (int64_t i = 1; i < n; ++i) {
    const float* row = logits.data() + (i - 1) * c.vocab_size;
    double max = row[0];
    for (int64_t v = 1; v < c.vocab_size; ++v) max = std::max<double>(max, row[v]);
    double sum = 0;
    for (int64_t v = 0; v < c.vocab_size; ++v) sum += std::exp(row[v] - max);
    out[static_cast<size_t>(i)] = row[prompt[static_cast<size_t>(i)]] - max - std::log(sum);
  }
  return out;
}

TEST(EngineOutputsTest, PromptLogprobsMatchDirectLogSoftmaxAcrossChunks) {
  const std::vector<int32_t> prompt =
      Encode("Once upon a time, there was a little girl named Lily. She liked to play outside.");
  const std::vector<double> ref = ReferencePromptLogprobs(prompt);
  args::ServerArgs args = testing::BaseArgs();
  args.Set("chunked-prefill-size", 8);  // the prompt spans several chunks
  auto engine = testing::MakeEngine(args);
  // Warm the cache with the same prompt: logprob_start_len must still force recomputation.
  Collector warm(1);
  ASSERT_TRUE(engine->Submit(testing::GreedyRequest("w", prompt, 2), warm.Sink(0)).ok());
  warm.Wait(1);
  Collector collector(1);
  GenerateRequest request = testing::GreedyRequest("lp", prompt, 2);
  request.return_logprob = true;
  request.logprob_start_len = 3;
  request.top_logprobs_num = 2;
  ASSERT_TRUE(engine->Submit(std::move(request), collector.Sink(0)).ok());
  collector.Wait(1);
  const RequestEvent& first = collector[0].events.front();
  ASSERT_EQ(first.input_logprobs.size(), prompt.size() - 3);
  EXPECT_TRUE(std::isnan(first.input_logprobs[0].logprob));
  for (size_t i = 1; i < first.input_logprobs.size(); ++i) {
    EXPECT_EQ(first.input_logprobs[i].token_id, prompt[3 + i]);
    EXPECT_NEAR(first.input_logprobs[i].logprob, ref[3 + i], 1e-4) << i;
    ASSERT_EQ(first.input_logprobs[i].top.size(), 2u);
    EXPECT_GE(first.input_logprobs[i].top[0].second, first.input_logprobs[i].top[1].second);
  }
  ASSERT_EQ(collector[0].events.back().output_logprobs.size() +
                (collector[0].events.size() > 1 ? first.output_logprobs.size() : 0),
            2u);
  EXPECT_TRUE(engine->CheckLeaks().ok());
}

TEST(EngineOutputsTest, SeededSamplingDoesNotDependOnTheBatch) {
  args::ServerArgs args = testing::BaseArgs();
  args.Set("enable-deterministic-inference", true);
  const std::vector<std::string> texts = {"Once upon a time", "The dog", "Lily was", "Tom and Sue"};
  auto make = [&](size_t i) {
    GenerateRequest r = testing::GreedyRequest("s" + std::to_string(i), Encode(texts[i % 4]), 20);
    r.sampling.top_k = sampling::kTopKAll;
    r.sampling.temperature = 0.9;
    r.sampling.top_p = 0.95;
    r.sampling.sampling_seed = 1000 + i;
    return r;
  };
  // Alone, one at a time.
  std::vector<std::vector<int32_t>> alone;
  {
    auto engine = testing::MakeEngine(args);
    for (size_t i = 0; i < 16; ++i) {
      Collector c(1);
      ASSERT_TRUE(engine->Submit(make(i), c.Sink(0)).ok());
      c.Wait(1);
      alone.push_back(c[0].tokens);
    }
  }
  // All together, paged, chunked, with the prefix cache warm.
  args.Set("page-size", 16);
  args.Set("chunked-prefill-size", 16);
  auto engine = testing::MakeEngine(args);
  Collector together(16);
  for (size_t i = 0; i < 16; ++i) ASSERT_TRUE(engine->Submit(make(i), together.Sink(i)).ok());
  together.Wait(16);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(together[i].tokens, alone[i]) << i;
  EXPECT_TRUE(engine->CheckLeaks().ok());
}

TEST(EngineOutputsTest, StreamIntervalCadence) {
  auto engine = testing::MakeEngine(testing::BaseArgs());
  Collector collector(2);
  GenerateRequest streaming = testing::GreedyRequest("k", Encode("Once upon a time"), 10);
  streaming.stream = true;
  streaming.sampling.stream_interval = 4;
  ASSERT_TRUE(engine->Submit(std::move(streaming), collector.Sink(0)).ok());
  GenerateRequest plain = testing::GreedyRequest("p", Encode("Once upon a time"), 10);
  ASSERT_TRUE(engine->Submit(std::move(plain), collector.Sink(1)).ok());
  collector.Wait(2);
  // Interval 4: events at output lengths 1, 5, 9, then the final one at 10.
  std::vector<int64_t> lengths;
  for (const RequestEvent& e : collector[0].events) lengths.push_back(e.completion_tokens);
  EXPECT_EQ(lengths, (std::vector<int64_t>{1, 5, 9, 10}));
  // A non-streaming request gets only its final event, carrying everything.
  ASSERT_EQ(collector[1].events.size(), 1u);
  EXPECT_EQ(collector[1].events[0].new_token_ids.size(), 10u);
  EXPECT_EQ(collector[1].tokens, collector[0].tokens);
}

TEST(EngineOutputsTest, ZeroMaxNewTokensIsPrefillOnly) {
  auto engine = testing::MakeEngine(testing::BaseArgs());
  Collector collector(1);
  GenerateRequest r = testing::GreedyRequest("z", Encode("Once upon a time"), 0);
  ASSERT_TRUE(engine->Submit(std::move(r), collector.Sink(0)).ok());
  collector.Wait(1);
  EXPECT_TRUE(collector[0].tokens.empty());
  EXPECT_EQ(collector[0].finish->kind, FinishKind::kLength);
  EXPECT_TRUE(engine->CheckLeaks().ok());
}

TEST(EngineOutputsTest, MaxNewTokensCappedByContext) {
  auto engine = testing::MakeEngine(testing::BaseArgs());
  const int64_t context = testing::LoadStories().model->config().context_length;
  std::vector<int32_t> prompt = Encode("Once upon a time");
  Collector collector(1);
  GenerateRequest r = testing::GreedyRequest("c", prompt, 1 << 20);
  ASSERT_TRUE(engine->Submit(std::move(r), collector.Sink(0)).ok());
  collector.Wait(1);
  // max_req_len = context - 1; max_new = max_req_len - prompt - 1.
  EXPECT_EQ(static_cast<int64_t>(collector[0].tokens.size()),
            context - 1 - static_cast<int64_t>(prompt.size()) - 1);
  EXPECT_EQ(collector[0].finish->kind, FinishKind::kLength);
  EXPECT_TRUE(engine->CheckLeaks().ok());
}

}  // namespace
}  // namespace radixserve::engine

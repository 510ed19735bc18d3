// Penalties, min_new_tokens and logit_bias shift logits by exactly the documented amounts
// (docs/sampling.md, logits_processor.h). Expected values are written out by hand.
#include "sampling/logits_processor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace radixserve::sampling {
namespace {

using nlohmann::json;

constexpr int32_t kVocab = 10;

SamplingParams Verified(const json& j) {
  auto p = SamplingParams::FromJson(j);
  EXPECT_TRUE(p.ok());
  EXPECT_TRUE(p->Verify(kVocab).ok());
  return p.value();
}

std::vector<float> BaseLogits() {
  return {1.0f, 2.0f, -1.0f, 3.0f, 0.0f, -2.0f, 0.5f, 4.0f, -0.5f, 1.5f};
}

TEST(LogitsProcessorTest, NoPenaltiesLeaveLogitsUntouched) {
  LogitsProcessor proc(kVocab);
  const SamplingParams params = Verified(json::object());
  const std::vector<int32_t> output = {1, 1, 3};
  std::vector<float> logits = BaseLogits();
  proc.ProcessRow(logits, {&params, output, {}, {}});
  EXPECT_EQ(logits, BaseLogits());
}

TEST(LogitsProcessorTest, FrequencyAndPresenceCountOutputTokens) {
  LogitsProcessor proc(kVocab);
  const SamplingParams params = Verified({{"frequency_penalty", 0.5}, {"presence_penalty", 0.25}});
  const std::vector<int32_t> output = {3, 3, 5, 7, 3};  // 3 x3, 5 x1, 7 x1
  std::vector<float> logits = BaseLogits();
  proc.ProcessRow(logits, {&params, output, {}, {}});
  std::vector<float> expected = BaseLogits();
  expected[3] = 3.0f - 0.5f * 3 - 0.25f;
  expected[5] = -2.0f - 0.5f * 1 - 0.25f;
  expected[7] = 4.0f - 0.5f * 1 - 0.25f;
  EXPECT_EQ(logits, expected);

  // Negative penalties reward repeats; a second call starts from clean counts.
  const SamplingParams reward = Verified({{"frequency_penalty", -1}, {"presence_penalty", -2}});
  logits = BaseLogits();
  proc.ProcessRow(logits, {&reward, output, {}, {}});
  expected = BaseLogits();
  expected[3] = 3.0f + 3 + 2;
  expected[5] = -2.0f + 1 + 2;
  expected[7] = 4.0f + 1 + 2;
  EXPECT_EQ(logits, expected);
}

TEST(LogitsProcessorTest, RepetitionPenaltyDividesPositiveMultipliesNegative) {
  LogitsProcessor proc(kVocab);
  const SamplingParams params = Verified({{"repetition_penalty", 1.5}});
  const std::vector<int32_t> output = {3, 5, 3, 4};
  std::vector<float> logits = BaseLogits();
  proc.ProcessRow(logits, {&params, output, {}, {}});
  std::vector<float> expected = BaseLogits();
  expected[3] = 2.0f;   // 3 / 1.5, once however often it occurred
  expected[5] = -3.0f;  // -2 * 1.5
  expected[4] = 0.0f;   // 0 * 1.5
  EXPECT_EQ(logits, expected);
}

TEST(LogitsProcessorTest, RepetitionThenFrequencyThenPresence) {
  LogitsProcessor proc(kVocab);
  const SamplingParams params =
      Verified({{"repetition_penalty", 2}, {"frequency_penalty", 0.5}, {"presence_penalty", 1}});
  const std::vector<int32_t> output = {7, 7, 2};
  std::vector<float> logits = BaseLogits();
  proc.ProcessRow(logits, {&params, output, {}, {}});
  EXPECT_EQ(logits[7], 4.0f / 2 - 0.5f * 2 - 1);
  EXPECT_EQ(logits[2], -1.0f * 2 - 0.5f - 1);
  EXPECT_EQ(logits[0], 1.0f);
}

TEST(LogitsProcessorTest, RepetitionPenaltyZeroIsAcceptedAndInert) {
  LogitsProcessor proc(kVocab);
  const SamplingParams params = Verified({{"repetition_penalty", 0}});
  const std::vector<int32_t> output = {3, 5};
  std::vector<float> logits = BaseLogits();
  proc.ProcessRow(logits, {&params, output, {}, {}});
  EXPECT_EQ(logits, BaseLogits());
}

TEST(LogitsProcessorTest, MinNewTokensMasksStopAndEosUntilReached) {
  LogitsProcessor proc(kVocab);
  const SamplingParams params = Verified({{"min_new_tokens", 3}, {"stop_token_ids", {4}}});
  const std::vector<int32_t> eos = {9};
  const float inf = std::numeric_limits<float>::infinity();

  const std::vector<int32_t> two = {0, 1};
  std::vector<float> logits = BaseLogits();
  proc.ProcessRow(logits, {&params, two, eos, {}});
  std::vector<float> expected = BaseLogits();
  expected[4] = -inf;
  expected[9] = -inf;
  EXPECT_EQ(logits, expected);

  const std::vector<int32_t> three = {0, 1, 6};  // boundary: min_new_tokens reached
  logits = BaseLogits();
  proc.ProcessRow(logits, {&params, three, eos, {}});
  EXPECT_EQ(logits, BaseLogits());
}

TEST(LogitsProcessorTest, LogitBiasAtVocabBoundaries) {
  LogitsProcessor proc(kVocab);
  const SamplingParams params =
      Verified(json::parse(R"({"logit_bias": {"0": 2.5, "9": -100, "3": 0}})"));
  std::vector<float> logits = BaseLogits();
  proc.ProcessRow(logits, {&params, {}, {}, {}});
  std::vector<float> expected = BaseLogits();
  expected[0] = 1.0f + 2.5f;
  expected[9] = 1.5f - 100.0f;
  EXPECT_EQ(logits, expected);
}

TEST(LogitsProcessorTest, BiasAppliesAfterPenaltiesAndBatchRowsAreIndependent) {
  LogitsProcessor proc(kVocab);
  const SamplingParams a =
      Verified(json::parse(R"({"presence_penalty": 1, "logit_bias": {"3": 0.5}})"));
  const SamplingParams b = Verified(json::object());
  const std::vector<int32_t> out_a = {3};
  const std::vector<int32_t> out_b = {3, 3};
  std::vector<float> batch = BaseLogits();
  const std::vector<float> base = BaseLogits();
  batch.insert(batch.end(), base.begin(), base.end());
  const LogitsRowContext rows[] = {{&a, out_a, {}, {}}, {&b, out_b, {}, {}}};
  proc.ProcessBatch(batch, rows);
  EXPECT_EQ(batch[3], 3.0f - 1.0f + 0.5f);
  EXPECT_EQ(batch[kVocab + 3], 3.0f);
}

TEST(LogitsProcessorTest, DuplicateLogitBiasKeysLastWins) {
  LogitsProcessor proc(kVocab);
  const SamplingParams params = Verified(json::parse(R"({"logit_bias": {"07": 1, "7": 3}})"));
  std::vector<float> logits = BaseLogits();
  proc.ProcessRow(logits, {&params, {}, {}, {}});
  EXPECT_EQ(logits[7], 4.0f + 3.0f);
  // The scratch marks were cleared: a second row gets the same result.
  logits = BaseLogits();
  proc.ProcessRow(logits, {&params, {}, {}, {}});
  EXPECT_EQ(logits[7], 4.0f + 3.0f);
}

}  // namespace
}  // namespace radixserve::sampling

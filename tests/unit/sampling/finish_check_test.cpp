#include "sampling/finish_check.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace radixserve::sampling {
namespace {

constexpr int64_t kVocab = 100;
const std::vector<int32_t> kEos = {2, 99};

SamplingParams Params(int64_t max_new_tokens, std::vector<int32_t> stop_ids, bool ignore_eos) {
  SamplingParams p;
  p.max_new_tokens = max_new_tokens;
  p.stop_token_ids = std::move(stop_ids);
  p.ignore_eos = ignore_eos;
  return p;
}

TEST(FinishCheckTest, OrdinaryTokenDoesNotFinish) {
  EXPECT_FALSE(CheckTokenFinish(Params(10, {7}, false), 3, 5, kEos, kVocab).has_value());
}

TEST(FinishCheckTest, StopTokenIdsAndEos) {
  std::optional<FinishReason> f = CheckTokenFinish(Params(10, {7, 11}, false), 3, 11, kEos, kVocab);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, FinishKind::kStop);
  EXPECT_EQ(f->matched_token, 11);
  f = CheckTokenFinish(Params(10, {}, false), 3, 99, kEos, kVocab);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, FinishKind::kStop);
  EXPECT_EQ(f->matched_token, 99);
}

TEST(FinishCheckTest, IgnoreEosDisablesEosAndStopIds) {
  EXPECT_FALSE(CheckTokenFinish(Params(10, {7}, true), 3, 7, kEos, kVocab).has_value());
  EXPECT_FALSE(CheckTokenFinish(Params(10, {7}, true), 3, 2, kEos, kVocab).has_value());
}

TEST(FinishCheckTest, LengthWinsOverEosOnTheLastStep) {
  std::optional<FinishReason> f = CheckTokenFinish(Params(4, {}, false), 4, 2, kEos, kVocab);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, FinishKind::kLength);
  EXPECT_EQ(f->length, 4);
  f = CheckTokenFinish(Params(4, {}, false), 3, 2, kEos, kVocab);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, FinishKind::kStop);
  EXPECT_EQ(f->matched_token, 2);
  f = CheckTokenFinish(Params(0, {}, false), 0, 5, kEos, kVocab);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, FinishKind::kLength);
  EXPECT_EQ(f->length, 0);
}

TEST(FinishCheckTest, NoMaxNewTokensMeansNoLengthLimit) {
  SamplingParams p;
  p.max_new_tokens.reset();
  EXPECT_FALSE(CheckTokenFinish(p, 1 << 20, 5, kEos, kVocab).has_value());
}

TEST(FinishCheckTest, OutOfVocabTokenIsNaN) {
  std::optional<FinishReason> f = CheckTokenFinish(Params(10, {}, false), 1, kVocab, kEos, kVocab);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, FinishKind::kStop);
  EXPECT_EQ(f->matched_str, "NaN happened");
  f = CheckTokenFinish(Params(10, {}, true), 1, -1, kEos, kVocab);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->matched_str, "NaN happened");
}

}  // namespace
}  // namespace radixserve::sampling

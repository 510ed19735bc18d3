#include "sampling/finish_check.h"

#include <gtest/gtest.h>

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
  EXPECT_FALSE(CheckTokenFinish(Params(10, {7}, false), 3, 5, kEos, kVocab).finished());
}

TEST(FinishCheckTest, StopTokenIdsAndEos) {
  TokenFinish f = CheckTokenFinish(Params(10, {7, 11}, false), 3, 11, kEos, kVocab);
  EXPECT_EQ(f.kind, FinishKind::kStopToken);
  EXPECT_EQ(f.matched_token, 11);
  f = CheckTokenFinish(Params(10, {}, false), 3, 99, kEos, kVocab);
  EXPECT_EQ(f.kind, FinishKind::kStopToken);
  EXPECT_EQ(f.matched_token, 99);
}

TEST(FinishCheckTest, IgnoreEosDisablesEosAndStopIds) {
  EXPECT_FALSE(CheckTokenFinish(Params(10, {7}, true), 3, 7, kEos, kVocab).finished());
  EXPECT_FALSE(CheckTokenFinish(Params(10, {7}, true), 3, 2, kEos, kVocab).finished());
}

TEST(FinishCheckTest, LengthWinsOverEosOnTheLastStep) {
  TokenFinish f = CheckTokenFinish(Params(4, {}, false), 4, 2, kEos, kVocab);
  EXPECT_EQ(f.kind, FinishKind::kLength);
  EXPECT_EQ(f.length, 4);
  f = CheckTokenFinish(Params(4, {}, false), 3, 2, kEos, kVocab);
  EXPECT_EQ(f.kind, FinishKind::kStopToken);
  f = CheckTokenFinish(Params(0, {}, false), 0, 5, kEos, kVocab);
  EXPECT_EQ(f.kind, FinishKind::kLength);
  EXPECT_EQ(f.length, 0);
}

TEST(FinishCheckTest, NoMaxNewTokensMeansNoLengthLimit) {
  SamplingParams p;
  p.max_new_tokens.reset();
  EXPECT_FALSE(CheckTokenFinish(p, 1 << 20, 5, kEos, kVocab).finished());
}

TEST(FinishCheckTest, OutOfVocabTokenIsNaN) {
  TokenFinish f = CheckTokenFinish(Params(10, {}, false), 1, kVocab, kEos, kVocab);
  EXPECT_EQ(f.kind, FinishKind::kStopText);
  EXPECT_EQ(f.matched_text, "NaN happened");
  EXPECT_EQ(CheckTokenFinish(Params(10, {}, true), 1, -1, kEos, kVocab).kind,
            FinishKind::kStopText);
}

}  // namespace
}  // namespace radixserve::sampling

// Statistical and exactness tests of the Sampler. Expected distributions are derived by hand from
// the documented rules (sampler.h, docs/sampling.md), not from sampler output.
#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <numeric>
#include <vector>

#include "common/thread_pool.h"
#include "sampling/logits_processor.h"
#include "sampling/request_rng.h"

namespace radixserve::sampling {
namespace {

constexpr int32_t kVocab = 8;
// Probabilities by rank, spread over token ids in a scrambled order so that sorting matters.
constexpr double kRankProbs[kVocab] = {0.30, 0.20, 0.15, 0.12, 0.10, 0.07, 0.04, 0.02};
constexpr int32_t kRankToken[kVocab] = {5, 2, 7, 0, 3, 6, 1, 4};

std::vector<float> Logits() {
  std::vector<float> logits(kVocab);
  for (int r = 0; r < kVocab; ++r)
    logits[kRankToken[r]] = static_cast<float>(std::log(kRankProbs[r]));
  return logits;
}

// Expected probability per token id: rank probabilities raised to 1/T, the first `kept` ranks
// kept, renormalized.
std::vector<double> Expected(double temperature, int kept) {
  std::vector<double> q(kVocab, 0.0);
  double z = 0.0;
  for (int r = 0; r < kept; ++r) z += std::pow(kRankProbs[r], 1.0 / temperature);
  for (int r = 0; r < kept; ++r) q[kRankToken[r]] = std::pow(kRankProbs[r], 1.0 / temperature) / z;
  return q;
}

// Chi-square critical values at significance 0.001 for 1..7 degrees of freedom.
constexpr double kChi2Critical001[8] = {0, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322};

void ExpectDistribution(const SampleRowParams& base, const std::vector<double>& expected) {
  Sampler sampler(kVocab);
  const std::vector<float> logits = Logits();
  constexpr int kDraws = 40000;
  std::vector<int> counts(kVocab, 0);
  SampleOutput out;
  SampleRowParams params = base;
  for (int i = 0; i < kDraws; ++i) {
    params.step = static_cast<uint64_t>(i);
    sampler.SampleRow(logits, params, out);
    ++counts[out.token_id];
  }
  double chi2 = 0.0;
  int support = 0;
  for (int t = 0; t < kVocab; ++t) {
    if (expected[t] == 0.0) {
      EXPECT_EQ(counts[t], 0) << "token " << t << " should be truncated";
      continue;
    }
    ++support;
    const double e = expected[t] * kDraws;
    chi2 += (counts[t] - e) * (counts[t] - e) / e;
  }
  ASSERT_GE(support, 2);
  EXPECT_LT(chi2, kChi2Critical001[support - 1]) << "support " << support;
}

SampleRowParams Row(double temperature, int64_t top_k, double top_p, double min_p) {
  SampleRowParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = 20261122;
  return p;
}

TEST(SamplerChiSquareTest, PlainSoftmax) {
  ExpectDistribution(Row(1.0, kTopKAll, 1, 0), Expected(1.0, 8));
}
TEST(SamplerChiSquareTest, LowTemperature) {
  ExpectDistribution(Row(0.5, kTopKAll, 1, 0), Expected(0.5, 8));
}
TEST(SamplerChiSquareTest, HighTemperature) {
  ExpectDistribution(Row(2.0, kTopKAll, 1, 0), Expected(2.0, 8));
}
TEST(SamplerChiSquareTest, TopK) { ExpectDistribution(Row(1.0, 3, 1, 0), Expected(1.0, 3)); }

TEST(SamplerChiSquareTest, TopP) {
  // Mass before ranks: 0, .30, .50, .65, .77 -> with top_p .7 ranks 0..3 are kept.
  ExpectDistribution(Row(1.0, kTopKAll, 0.7, 0), Expected(1.0, 4));
}

TEST(SamplerChiSquareTest, MinP) {
  // Threshold .30 * .3 = .09 keeps probabilities .30 .20 .15 .12 .10.
  ExpectDistribution(Row(1.0, kTopKAll, 1, 0.3), Expected(1.0, 5));
}

TEST(SamplerChiSquareTest, TemperatureWithTopKTopPMinP) {
  // T = 2: q_r ~ sqrt(p_r); sqrt values .5477 .4472 .3873 .3464 .3162 .2646 .2 .1414 (sum 2.6548)
  // -> q = .2063 .1685 .1459 .1305 .1191 .0997 .0753 .0533.
  // top_k 6 keeps ranks 0..5; top_p .6: mass before rank 4 is .6512 > .6 -> ranks 0..3;
  // min_p .7: threshold .1444 drops rank 3 (.1305) -> ranks 0..2.
  ExpectDistribution(Row(2.0, 6, 0.6, 0.7), Expected(2.0, 3));
  // Without min_p the top-p cut decides (ranks 0..3); without top_p the top-k cut (0..5).
  ExpectDistribution(Row(2.0, 6, 0.6, 0.0), Expected(2.0, 4));
  ExpectDistribution(Row(2.0, 6, 1.0, 0.0), Expected(2.0, 6));
}

std::vector<double> LogSoftmax(const std::vector<float>& logits, double temperature) {
  double max = -INFINITY;
  for (float l : logits) max = std::max(max, l / temperature);
  double sum = 0.0;
  for (float l : logits) sum += std::exp(l / temperature - max);
  std::vector<double> out;
  for (float l : logits) out.push_back(l / temperature - max - std::log(sum));
  return out;
}

TEST(SamplerTest, GreedyIsArgmaxWithLowestIdOnTies) {
  Sampler sampler(6);
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 2.0f};
  SampleOutput out;
  SampleRowParams greedy = Row(1.0, 1, 1, 0);
  for (uint64_t step = 0; step < 20; ++step) {
    greedy.step = step;
    sampler.SampleRow(logits, greedy, out);
    EXPECT_EQ(out.token_id, 1);
  }
  EXPECT_EQ(ArgmaxLowestId(logits), 1);
  // Greedy logprob: log_softmax of the processed logits.
  EXPECT_NEAR(out.logprob, LogSoftmax(logits, 1.0)[1], 1e-6);
}

TEST(SamplerTest, LogprobsComeBeforeTruncationAndAfterTemperature) {
  Sampler sampler(kVocab);
  const std::vector<float> logits = Logits();
  const std::vector<double> reference = LogSoftmax(logits, 0.5);
  SampleRowParams params = Row(0.5, 2, 1, 0);
  params.top_logprobs_num = 3;
  const std::vector<int32_t> ids = {4, 5};
  params.token_ids_logprob = ids;
  SampleOutput out;
  for (uint64_t step = 0; step < 10; ++step) {
    params.step = step;
    sampler.SampleRow(logits, params, out);
    ASSERT_TRUE(out.token_id == kRankToken[0] || out.token_id == kRankToken[1]);
    EXPECT_NEAR(out.logprob, reference[out.token_id], 1e-5);
  }
  ASSERT_EQ(out.top_logprobs.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(out.top_logprobs[r].token_id, kRankToken[r]);
    EXPECT_NEAR(out.top_logprobs[r].logprob, reference[kRankToken[r]], 1e-5);
  }
  ASSERT_EQ(out.token_ids_logprobs.size(), 2u);
  EXPECT_NEAR(out.token_ids_logprobs[0], reference[4], 1e-5);  // truncated token: still reported
  EXPECT_NEAR(out.token_ids_logprobs[1], reference[5], 1e-5);
}

TEST(SamplerTest, MaskedTokensNeverSampledAndClampToLowestFloat) {
  Sampler sampler(4);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {-inf, 1.0f, -inf, 1.0f};
  SampleRowParams params = Row(1.0, kTopKAll, 1, 0);
  params.token_ids_logprob = std::span<const int32_t>();
  const std::vector<int32_t> ids = {0};
  params.token_ids_logprob = ids;
  SampleOutput out;
  for (uint64_t step = 0; step < 200; ++step) {
    params.step = step;
    sampler.SampleRow(logits, params, out);
    ASSERT_TRUE(out.token_id == 1 || out.token_id == 3);
    EXPECT_NEAR(out.logprob, std::log(0.5), 1e-6);
  }
  EXPECT_EQ(out.token_ids_logprobs[0], std::numeric_limits<float>::lowest());
}

TEST(SamplerTest, TopKOneWithTemperatureIsArgmax) {
  Sampler sampler(kVocab);
  SampleOutput out;
  sampler.SampleRow(Logits(), Row(0.7, 1, 1, 0), out);
  EXPECT_EQ(out.token_id, kRankToken[0]);
}

// A seeded row gives the same tokens and logprobs alone and inside a batch of 16 rows whose other
// params, logits and seeds all differ.
TEST(SamplerTest, SeededRowIsBatchInvariant) {
  constexpr int32_t kV = 64;
  constexpr int kRows = 16;
  constexpr int kTarget = 9;
  std::vector<float> batch(static_cast<size_t>(kRows) * kV);
  for (size_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<float>(std::sin(0.37 * i) * 3);
  std::vector<SampleRowParams> params(kRows);
  for (int r = 0; r < kRows; ++r) {
    params[r] =
        Row(0.3 + 0.1 * r, r % 3 == 0 ? kTopKAll : 5 + r, r % 2 ? 0.8 : 1.0, r % 4 ? 0.0 : 0.1);
    params[r].seed = 1000 + static_cast<uint64_t>(r) * 7919;
    params[r].top_logprobs_num = r % 5;
  }
  params[kTarget] = Row(0.9, 20, 0.95, 0.02);
  params[kTarget].seed = 4242;
  params[kTarget].top_logprobs_num = 2;

  Sampler batched(kV);
  Sampler alone(kV);
  std::vector<SampleOutput> outs(kRows);
  SampleOutput single;
  const std::span<const float> target_logits(batch.data() + kTarget * kV, kV);
  int distinct_tokens = 0;
  int previous = -1;
  for (uint64_t step = 0; step < 100; ++step) {
    for (auto& p : params) p.step = step;
    batched.SampleBatch(batch, params, outs);
    alone.SampleRow(target_logits, params[kTarget], single);
    ASSERT_EQ(outs[kTarget].token_id, single.token_id) << "step " << step;
    ASSERT_EQ(outs[kTarget].logprob, single.logprob);
    ASSERT_EQ(outs[kTarget].top_logprobs.size(), single.top_logprobs.size());
    if (single.token_id != previous) ++distinct_tokens;
    previous = single.token_id;
  }
  EXPECT_GT(distinct_tokens, 10);  // the row really samples (not a constant)
}

// A row of a served vocabulary's size (many blocks, split over a pool's threads): each draw
// against the documented rule evaluated here in double precision (softmax(logits / T), the
// truncation by sorted prefix, the inverse CDF in token-id order with u = RequestRng's uniform),
// for every kernel variant, with and without a pool. Draws whose u falls within float rounding
// of a boundary between two tokens may differ; allow a handful.
struct LongRow {
  static constexpr int32_t kV = 40000;
  std::vector<float> logits;
  LongRow() : logits(kV) {
    for (int32_t i = 0; i < kV; ++i) {
      logits[static_cast<size_t>(i)] =
          static_cast<float>(std::sin(i * 0.7311) * 4.0 + std::cos(i * 0.0173) * 2.0);
    }
    for (int32_t i : {11, 333, 20001, 39998}) logits[static_cast<size_t>(i)] = 9.5f;
    logits[32000] = 10.25f;  // the largest, twice: the lower id is the greedy token
    logits[17] = 10.25f;
    logits[5] = -std::numeric_limits<float>::infinity();  // masked
  }
};

// The kept tokens of a setting (in id order) and their probabilities, in double precision.
struct Rule {
  std::vector<int32_t> ids;
  std::vector<double> probs;

  Rule(const LongRow& row, const SampleRowParams& p) {
    const auto v = static_cast<size_t>(LongRow::kV);
    std::vector<double> prob(v);
    double z = 0.0;
    const double max = 10.25 / p.temperature;
    for (size_t i = 0; i < v; ++i) {
      prob[i] = std::exp(row.logits[i] / p.temperature - max);
      z += prob[i];
    }
    for (double& q : prob) q /= z;
    std::vector<int32_t> order(v);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return prob[static_cast<size_t>(a)] > prob[static_cast<size_t>(b)];
    });
    const double p_max = prob[static_cast<size_t>(order[0])];
    size_t kept = 0;
    double before = 0.0;
    for (; kept < std::min(v, static_cast<size_t>(p.top_k)); ++kept) {
      const double q = prob[static_cast<size_t>(order[kept])];
      if (kept > 0 && (before > p.top_p || q < p_max * p.min_p)) break;
      before += q;
    }
    ids.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept));
    std::sort(ids.begin(), ids.end());
    for (int32_t id : ids) probs.push_back(prob[static_cast<size_t>(id)]);
  }

  int32_t Draw(uint64_t seed, uint64_t step) const {
    double mass = 0.0;
    for (double q : probs) mass += q;
    const double target = RequestRng(seed).Uniform(step) * mass;
    double cumulative = 0.0;
    for (size_t i = 0; i < ids.size(); ++i) {
      cumulative += probs[i];
      if (cumulative > target) return ids[i];
    }
    return ids.back();
  }
};

TEST(SamplerLongRowTest, DrawsFollowTheRuleInEveryVariantWithAndWithoutAPool) {
  const LongRow row;
  ThreadPool pool(2);
  const SampleRowParams settings[] = {Row(1.0, kTopKAll, 1.0, 0.0), Row(0.7, kTopKAll, 0.9, 0.0),
                                      Row(1.0, 40, 1.0, 0.0),       Row(1.3, kTopKAll, 1.0, 0.05),
                                      Row(0.8, 1000, 0.95, 0.01),   Row(0.5, 1, 1.0, 0.0)};
  std::vector<Rule> rules;
  for (const SampleRowParams& params : settings) rules.emplace_back(row, params);
  for (const kernels::KernelTable* table : kernels::AvailableKernels()) {
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      SCOPED_TRACE(std::string(table->name) + (p != nullptr ? " pool" : " alone"));
      Sampler sampler(LongRow::kV, *table, p);
      SampleOutput out;
      for (size_t k = 0; k < std::size(settings); ++k) {
        SampleRowParams params = settings[k];
        SCOPED_TRACE(params.top_k);
        const Rule& rule = rules[k];
        int differ = 0, distinct = 0, previous = -1;
        for (uint64_t step = 0; step < 200; ++step) {
          params.step = step;
          sampler.SampleRow(row.logits, params, out);
          ASSERT_NE(out.token_id, 5) << "a masked token was drawn";
          differ += out.token_id != rule.Draw(params.seed, step) ? 1 : 0;
          distinct += out.token_id != previous ? 1 : 0;
          previous = out.token_id;
        }
        EXPECT_LE(differ, 2);
        if (params.top_k == 1) {
          EXPECT_EQ(out.token_id, 17);
        } else {
          EXPECT_GT(distinct, 20);
        }
      }
    }
  }
}

// The top logprobs of a long row: the ids of a double-precision log_softmax sorted (ties to the
// lower id), the values to float rounding, for every variant.
TEST(SamplerLongRowTest, TopLogprobsAreTheLargest) {
  const LongRow row;
  const double temperature = 0.9;
  std::vector<double> logprob(LongRow::kV);
  double z = 0.0;
  for (int32_t i = 0; i < LongRow::kV; ++i)
    z += std::exp(row.logits[static_cast<size_t>(i)] / temperature);
  for (int32_t i = 0; i < LongRow::kV; ++i) {
    logprob[static_cast<size_t>(i)] =
        row.logits[static_cast<size_t>(i)] / temperature - std::log(z);
  }
  std::vector<int32_t> order(LongRow::kV);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logprob[static_cast<size_t>(a)] > logprob[static_cast<size_t>(b)];
  });
  for (const kernels::KernelTable* table : kernels::AvailableKernels()) {
    SCOPED_TRACE(std::string(table->name));
    Sampler sampler(LongRow::kV, *table);
    SampleOutput out;
    for (int32_t n : {1, 5, 20, 200}) {
      SampleRowParams params = Row(temperature, kTopKAll, 1.0, 0.0);
      params.top_logprobs_num = n;
      sampler.SampleRow(row.logits, params, out);
      ASSERT_EQ(out.top_logprobs.size(), static_cast<size_t>(n));
      for (int32_t i = 0; i < n; ++i) {
        EXPECT_EQ(out.top_logprobs[static_cast<size_t>(i)].token_id, order[static_cast<size_t>(i)])
            << "rank " << i << " of " << n;
        EXPECT_NEAR(out.top_logprobs[static_cast<size_t>(i)].logprob,
                    logprob[static_cast<size_t>(order[static_cast<size_t>(i)])], 1e-4);
      }
    }
  }
}

// The pool splits the row's passes over whole blocks, so it gives the same bits as one thread.
TEST(SamplerLongRowTest, APoolChangesNoToken) {
  const LongRow row;
  ThreadPool pool(2);
  Sampler alone(LongRow::kV), pooled(LongRow::kV, kernels::ActiveKernels(), &pool);
  SampleOutput a, b;
  for (uint64_t step = 0; step < 200; ++step) {
    SampleRowParams params = Row(0.9, step % 2 ? 50 : kTopKAll, 0.9, 0.0);
    params.step = step;
    params.top_logprobs_num = 3;
    params.return_entropy = true;
    alone.SampleRow(row.logits, params, a);
    pooled.SampleRow(row.logits, params, b);
    ASSERT_EQ(a.token_id, b.token_id) << "step " << step;
    ASSERT_EQ(a.logprob, b.logprob);
    ASSERT_EQ(a.entropy, b.entropy);
    ASSERT_EQ(a.top_logprobs.size(), b.top_logprobs.size());
  }
}

}  // namespace
}  // namespace radixserve::sampling

namespace radixserve::sampling {
namespace {

TEST(SamplerScoreTest, PromptLogprobsAreRawLogSoftmax) {
  Sampler sampler(kVocab);
  const std::vector<float> logits = Logits();
  SampleRowParams params;  // temperature 1
  params.top_logprobs_num = 2;
  SampleOutput out;
  sampler.ScoreRow(logits, 4, params, out);
  EXPECT_EQ(out.token_id, 4);
  EXPECT_NEAR(out.logprob, std::log(0.02), 1e-6);  // token 4 has probability .02
  ASSERT_EQ(out.top_logprobs.size(), 2u);
  EXPECT_EQ(out.top_logprobs[0].token_id, kRankToken[0]);
  EXPECT_NEAR(out.top_logprobs[0].logprob, std::log(0.30), 1e-6);
  EXPECT_EQ(out.top_logprobs[1].token_id, kRankToken[1]);
}

TEST(SamplerScoreTest, AllMaskedRowFallsBackToArgmax) {
  Sampler sampler(3);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {-inf, -inf, -inf};
  SampleOutput out;
  sampler.SampleRow(logits, Row(1.0, kTopKAll, 0.9, 0), out);
  EXPECT_EQ(out.token_id, 0);
  EXPECT_EQ(out.logprob, std::numeric_limits<float>::lowest());
}

}  // namespace
}  // namespace radixserve::sampling

namespace radixserve::sampling {
namespace {

// The sorted (top-k/top-p), set (min-p only) and plain paths all draw in token-id order, so when
// nothing is actually truncated they must pick the same tokens for the same seed and step.
TEST(SamplerTest, TruncationPathsAgreeWhenNothingIsTruncated) {
  std::vector<float> logits = Logits();
  logits.push_back(-std::numeric_limits<float>::infinity());  // id 8: masked, rank last
  Sampler sampler(kVocab + 1);
  SampleRowParams plain = Row(1.0, kTopKAll, 1, 0);
  SampleRowParams sorted = Row(1.0, kVocab, 1, 0);  // drops only the masked token
  SampleRowParams min_p_only = Row(1.0, kTopKAll, 1, 1e-9);
  SampleOutput a, b, c;
  for (uint64_t step = 0; step < 500; ++step) {
    plain.step = sorted.step = min_p_only.step = step;
    sampler.SampleRow(logits, plain, a);
    sampler.SampleRow(logits, sorted, b);
    sampler.SampleRow(logits, min_p_only, c);
    ASSERT_EQ(a.token_id, b.token_id) << step;
    ASSERT_EQ(a.token_id, c.token_id) << step;
  }
}

TEST(SamplerTest, NoLogprobModeStillSamplesTheSameToken) {
  Sampler sampler(kVocab);
  SampleRowParams with = Row(0.8, 5, 0.9, 0.01);
  SampleRowParams without = with;
  without.return_logprob = false;
  SampleOutput a, b;
  for (uint64_t step = 0; step < 100; ++step) {
    with.step = without.step = step;
    sampler.SampleRow(Logits(), with, a);
    sampler.SampleRow(Logits(), without, b);
    ASSERT_EQ(a.token_id, b.token_id);
  }
  EXPECT_EQ(b.logprob, 0.0f);
}

}  // namespace
}  // namespace radixserve::sampling

// Counts heap allocations made while g_count_allocations is set (replaces the global operator
// new for this test binary).
namespace {
bool g_count_allocations = false;
size_t g_allocations = 0;
}  // namespace

// GCC cannot see that malloc/free pair up through the replaced operators.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t size) {
  if (g_count_allocations) ++g_allocations;
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
// The nothrow form too (std::stable_sort's buffer), so every delete frees what malloc gave.
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  if (g_count_allocations) ++g_allocations;
  return std::malloc(size == 0 ? 1 : size);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace radixserve::sampling {
namespace {

// After the first step has sized the outputs, processing and sampling allocate nothing.
TEST(SamplerTest, NoHeapAllocationInTheHotPath) {
  constexpr int32_t kV = 4096;
  std::vector<float> logits(kV);
  for (int32_t i = 0; i < kV; ++i) logits[i] = static_cast<float>(std::cos(i * 0.1) * 4);
  auto parsed = SamplingParams::FromJson(nlohmann::json::parse(
      R"({"temperature": 0.8, "top_k": 100, "top_p": 0.9, "min_p": 0.01,
          "frequency_penalty": 0.3, "presence_penalty": 0.2, "repetition_penalty": 1.1,
          "min_new_tokens": 50, "stop_token_ids": [7], "logit_bias": {"5": 1.5}})"));
  ASSERT_TRUE(parsed.ok());
  const SamplingParams& params = parsed.value();
  const std::vector<int32_t> eos = {2};
  const std::vector<int32_t> ids = {1, 2, 3};
  std::vector<int32_t> output;
  output.reserve(64);
  LogitsProcessor processor(kV);
  Sampler sampler(kV);
  SampleOutput out;
  std::vector<float> row(kV);
  for (uint64_t step = 0; step < 40; ++step) {
    if (step == 1) g_count_allocations = true;
    row = logits;  // same size: no allocation
    processor.ProcessRow(row, {&params, output, eos, {}});
    SampleRowParams sample = SampleRowParams::From(params, 99, step);
    sample.top_logprobs_num = 5;
    sample.token_ids_logprob = ids;
    sampler.SampleRow(row, sample, out);
    output.push_back(out.token_id);
  }
  g_count_allocations = false;
  EXPECT_EQ(g_allocations, 0u);
}

}  // namespace
}  // namespace radixserve::sampling

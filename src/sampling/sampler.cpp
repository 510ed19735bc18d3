#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/check.h"
#include "sampling/fast_exp.h"
#include "sampling/request_rng.h"

namespace radixserve::sampling {
namespace {

constexpr float kLowest = std::numeric_limits<float>::lowest();

// Sort keys: larger value first, then lower id.
template <typename T>
struct ByValueDesc {
  const T* values;
  bool operator()(int32_t a, int32_t b) const {
    const T va = values[a];
    const T vb = values[b];
    return va != vb ? va > vb : a < b;
  }
};
using ByLogprobDesc = ByValueDesc<float>;
using ByProbDesc = ByValueDesc<float>;

}  // namespace

SampleRowParams SampleRowParams::From(const SamplingParams& params, uint64_t seed, uint64_t step) {
  SampleRowParams row;
  row.temperature = params.temperature;
  row.top_k = params.top_k;
  row.top_p = params.top_p;
  row.min_p = params.min_p;
  row.seed = seed;
  row.step = step;
  return row;
}

float MaxValue(std::span<const float> values) {
  // Eight independent lanes so the compiler can vectorize the reduction; NaN never wins.
  constexpr size_t kLanes = 8;
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<float>::infinity());
  size_t i = 0;
  for (; i + kLanes <= values.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j)
      lanes[j] = values[i + j] > lanes[j] ? values[i + j] : lanes[j];
  }
  for (; i < values.size(); ++i) lanes[0] = values[i] > lanes[0] ? values[i] : lanes[0];
  return *std::max_element(lanes, lanes + kLanes);
}

int32_t ArgmaxLowestId(std::span<const float> logits) {
  const float max = MaxValue(logits);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == max) return static_cast<int32_t>(i);  // first, i.e. lowest id
  }
  return 0;  // every value NaN
}

Sampler::Sampler(int32_t vocab_size)
    : vocab_size_(vocab_size),
      scaled_(static_cast<size_t>(vocab_size)),
      logprobs_(static_cast<size_t>(vocab_size)),
      probs_(static_cast<size_t>(vocab_size)),
      order_(static_cast<size_t>(vocab_size)) {
  RADIX_CHECK(vocab_size > 0);
}

bool Sampler::ComputeProbs(std::span<const float> logits, double temperature, bool with_logprobs) {
  const size_t n = logits.size();
  const float inv_t = static_cast<float>(1.0 / temperature);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) {
    const float s = logits[i] * inv_t;
    scaled_[i] = s != s ? kNegInf : s;  // a NaN logit can never be chosen
  }
  const float max_scaled = MaxValue(scaled_);
  if (!std::isfinite(max_scaled)) {
    std::fill(logprobs_.begin(), logprobs_.end(), kLowest);
    std::fill(probs_.begin(), probs_.end(), 0.0f);
    return false;
  }
  for (size_t i = 0; i < n; ++i) probs_[i] = FastExp(scaled_[i] - max_scaled);
  double sums[4] = {0.0, 0.0, 0.0, 0.0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (size_t j = 0; j < 4; ++j) sums[j] += static_cast<double>(probs_[i + j]);
  }
  for (; i < n; ++i) sums[0] += static_cast<double>(probs_[i]);
  const double sum = (sums[0] + sums[1]) + (sums[2] + sums[3]);
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (size_t t = 0; t < n; ++t) probs_[t] *= inv_sum;
  if (with_logprobs) {
    const float log_norm = static_cast<float>(static_cast<double>(max_scaled) + std::log(sum));
    for (size_t t = 0; t < n; ++t) logprobs_[t] = std::max(scaled_[t] - log_norm, kLowest);
  }
  return true;
}

int32_t Sampler::SampleUnfiltered(const SampleRowParams& params) {
  const size_t n = static_cast<size_t>(vocab_size_);
  const double target = RequestRng(params.seed).Uniform(params.step);
  double cumulative = 0.0;
  int32_t last_positive = 0;
  for (size_t i = 0; i < n; ++i) {
    if (probs_[i] <= 0.0f) continue;
    cumulative += static_cast<double>(probs_[i]);
    last_positive = static_cast<int32_t>(i);
    if (cumulative > target) return last_positive;
  }
  return last_positive;  // rounding left the target beyond the total mass
}

size_t Sampler::GatherCandidates(const SampleRowParams& params, float p_max_float) {
  // Sorting the whole vocabulary is the slow part, so sort only the tokens with p >= tau, for a
  // tau low enough that the kept prefix provably lies inside that set: it holds all tokens that
  // pass min-p, or at least top_k tokens, or more than top_p of the mass (the first token after
  // it would have more than top_p before it). Start near the top and lower tau until one holds;
  // each try is one vectorizable pass.
  const size_t n = static_cast<size_t>(vocab_size_);
  // One float step below the exact threshold: the candidate set may only be a superset.
  const float min_p_threshold =
      std::nextafter(static_cast<float>(static_cast<double>(p_max_float) * params.min_p), 0.0f);
  const size_t k = static_cast<size_t>(std::min<int64_t>(params.top_k, vocab_size_));
  const float floor_tau = p_max_float * 1e-12f;
  float tau = std::max(min_p_threshold, p_max_float * 0.25f);
  while (tau > 0.0f) {
    size_t count = 0;
    double mass = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const bool in = probs_[i] >= tau;
      count += in ? 1 : 0;
      mass += in ? static_cast<double>(probs_[i]) : 0.0;
    }
    if (tau <= min_p_threshold || count >= k || mass > params.top_p) break;
    tau = tau * 0.125f;
    if (tau < floor_tau) tau = std::max(min_p_threshold, 0.0f);
    if (tau <= 0.0f) break;
  }
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (probs_[i] >= tau) order_[count++] = static_cast<int32_t>(i);
  }
  return count;
}

int32_t Sampler::SampleFiltered(const SampleRowParams& params) {
  const float p_max = MaxValue(probs_);
  const double min_p_threshold = static_cast<double>(p_max) * params.min_p;
  size_t kept = 0;
  if (params.top_k >= vocab_size_ && params.top_p >= 1.0) {
    // min-p alone keeps a set, not a prefix: no sort needed.
    for (size_t i = 0; i < static_cast<size_t>(vocab_size_); ++i) {
      if (static_cast<double>(probs_[i]) >= min_p_threshold)
        order_[kept++] = static_cast<int32_t>(i);
    }
  } else {
    const size_t count = GatherCandidates(params, p_max);
    const size_t k =
        std::min(count, static_cast<size_t>(std::min<int64_t>(params.top_k, vocab_size_)));
    ByProbDesc cmp{probs_.data()};
    const auto first = order_.begin();
    if (k < count) {
      std::partial_sort(first, first + static_cast<std::ptrdiff_t>(k),
                        first + static_cast<std::ptrdiff_t>(count), cmp);
    } else {
      std::sort(first, first + static_cast<std::ptrdiff_t>(count), cmp);
    }
    // Longest prefix satisfying top-k, top-p (mass strictly before the token <= top_p), min-p.
    double before = 0.0;
    for (; kept < k; ++kept) {
      const double p = static_cast<double>(probs_[static_cast<size_t>(order_[kept])]);
      if (kept > 0 && (before > params.top_p || p < min_p_threshold)) break;
      before += p;
    }
    // Draw in token-id order, as the unfiltered path does.
    std::sort(first, first + static_cast<std::ptrdiff_t>(kept));
  }

  double mass = 0.0;
  for (size_t i = 0; i < kept; ++i)
    mass += static_cast<double>(probs_[static_cast<size_t>(order_[i])]);
  const double target = RequestRng(params.seed).Uniform(params.step) * mass;
  double cumulative = 0.0;
  for (size_t i = 0; i < kept; ++i) {
    cumulative += static_cast<double>(probs_[static_cast<size_t>(order_[i])]);
    if (cumulative > target) return order_[i];
  }
  return order_[kept - 1];
}

void Sampler::FillLogprobOutputs(const SampleRowParams& params, SampleOutput& out) {
  out.logprob = logprobs_[static_cast<size_t>(out.token_id)];
  out.top_logprobs.clear();
  if (params.top_logprobs_num > 0) {
    const size_t k = std::min<size_t>(static_cast<size_t>(params.top_logprobs_num),
                                      static_cast<size_t>(vocab_size_));
    std::iota(order_.begin(), order_.end(), 0);
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k), order_.end(),
                      ByLogprobDesc{logprobs_.data()});
    for (size_t i = 0; i < k; ++i) {
      out.top_logprobs.push_back({order_[i], logprobs_[static_cast<size_t>(order_[i])]});
    }
  }
  out.token_ids_logprobs.clear();
  for (int32_t id : params.token_ids_logprob) {
    RADIX_CHECK_MSG(id >= 0 && id < vocab_size_, "token_ids_logprob must be validated");
    out.token_ids_logprobs.push_back(logprobs_[static_cast<size_t>(id)]);
  }
}

void Sampler::SampleRow(std::span<const float> logits, const SampleRowParams& params,
                        SampleOutput& out) {
  RADIX_CHECK(logits.size() == static_cast<size_t>(vocab_size_));
  RADIX_CHECK(params.temperature > 0.0);
  RADIX_CHECK(params.top_k >= 1);
  const bool greedy = params.top_k <= 1;
  bool finite = true;
  const bool with_logprobs = params.return_logprob || params.return_entropy;
  if (!greedy || with_logprobs) finite = ComputeProbs(logits, params.temperature, with_logprobs);
  out.entropy = 0.0f;
  if (params.return_entropy && finite) {
    double sum = 0.0;
    for (int32_t v = 0; v < vocab_size_; ++v) {
      const auto i = static_cast<size_t>(v);
      if (probs_[i] > 0.0f) sum -= static_cast<double>(probs_[i]) * logprobs_[i];
    }
    out.entropy = static_cast<float>(sum);
  }
  if (greedy || !finite) {
    out.token_id = ArgmaxLowestId(logits);
  } else if (params.top_k >= vocab_size_ && params.top_p >= 1.0 && params.min_p <= 0.0) {
    out.token_id = SampleUnfiltered(params);
  } else {
    out.token_id = SampleFiltered(params);
  }
  if (params.return_logprob) {
    FillLogprobOutputs(params, out);
  } else {
    out.logprob = 0.0f;
    out.top_logprobs.clear();
    out.token_ids_logprobs.clear();
  }
}

void Sampler::ScoreRow(std::span<const float> logits, int32_t token_id,
                       const SampleRowParams& params, SampleOutput& out) {
  RADIX_CHECK(logits.size() == static_cast<size_t>(vocab_size_));
  RADIX_CHECK(params.temperature > 0.0);
  RADIX_CHECK(token_id >= 0 && token_id < vocab_size_);
  (void)ComputeProbs(logits, params.temperature, /*with_logprobs=*/true);
  out.token_id = token_id;
  FillLogprobOutputs(params, out);
}

void Sampler::SampleBatch(std::span<const float> logits, std::span<const SampleRowParams> params,
                          std::span<SampleOutput> outputs) {
  const size_t vocab = static_cast<size_t>(vocab_size_);
  RADIX_CHECK(logits.size() == params.size() * vocab);
  RADIX_CHECK(outputs.size() == params.size());
  for (size_t r = 0; r < params.size(); ++r) {
    SampleRow(logits.subspan(r * vocab, vocab), params[r], outputs[r]);
  }
}

}  // namespace radixserve::sampling

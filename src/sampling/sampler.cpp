#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "common/check.h"
#include "sampling/request_rng.h"

namespace radixserve::sampling {
namespace {

constexpr float kLowest = std::numeric_limits<float>::lowest();

// Sort keys: larger probability first, then lower id.
struct ByProbDesc {
  const float* probs;
  bool operator()(int32_t a, int32_t b) const {
    const float pa = probs[a];
    const float pb = probs[b];
    return pa != pb ? pa > pb : a < b;
  }
};

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

int32_t ArgmaxLowestId(std::span<const float> logits, const kernels::KernelTable& kernels) {
  const int64_t best = kernels.argmax(logits.data(), static_cast<int64_t>(logits.size()));
  return best < 0 ? 0 : static_cast<int32_t>(best);  // every value NaN: 0
}

Sampler::Sampler(int32_t vocab_size, const kernels::KernelTable& kernels, ThreadPool* pool)
    : vocab_size_(vocab_size),
      kernels_(kernels),
      pool_(pool),
      part_best_(static_cast<size_t>(pool != nullptr ? pool->size() : 1)),
      probs_(static_cast<size_t>(vocab_size)),
      block_sum_(static_cast<size_t>((vocab_size + kernels::kExpBlock - 1) / kernels::kExpBlock)),
      block_max_(block_sum_.size()),
      block_scratch_(block_sum_.size()),
      order_(static_cast<size_t>(vocab_size)) {
  RADIX_CHECK(vocab_size > 0);
}

size_t Sampler::BlockEnd(size_t b) const {
  return std::min(BlockBegin(b + 1), static_cast<size_t>(vocab_size_));
}

template <typename Fn>
void Sampler::OverBlocks(Fn&& fn) {
  // A part below this many blocks costs more to hand over than it saves.
  constexpr size_t kMinBlocksPerPart = 32;
  const size_t blocks = block_sum_.size();
  if (pool_ == nullptr || pool_->size() < 2 || blocks < 2 * kMinBlocksPerPart) {
    fn(0, size_t{0}, blocks);
    return;
  }
  pool_->RunOnAll([&](int part, int parts) {
    const auto p = static_cast<size_t>(part), count = static_cast<size_t>(parts);
    fn(part, blocks * p / count, blocks * (p + 1) / count);
  });
}

int64_t Sampler::Argmax(std::span<const float> logits) {
  std::fill(part_best_.begin(), part_best_.end(), int64_t{-1});
  OverBlocks([&](int part, size_t first, size_t end) {
    const size_t begin = BlockBegin(first);
    const int64_t best =
        kernels_.argmax(logits.data() + begin, static_cast<int64_t>(BlockEnd(end - 1) - begin));
    part_best_[static_cast<size_t>(part)] = best < 0 ? -1 : best + static_cast<int64_t>(begin);
  });
  // Parts in token order: a later part wins only with a strictly larger value.
  int64_t best = -1;
  for (int64_t candidate : part_best_) {
    if (candidate >= 0 &&
        (best < 0 || logits[static_cast<size_t>(candidate)] > logits[static_cast<size_t>(best)])) {
      best = candidate;
    }
  }
  return best;
}

bool Sampler::ComputeProbs(std::span<const float> logits, double temperature) {
  const float inv_t = static_cast<float>(1.0 / temperature);
  logits_ = logits;
  inv_t_ = inv_t;
  total_ = 0.0;  // until the row proves finite
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t best = Argmax(logits);
  // Rounding is monotonic, so the largest scaled logit is the largest logit scaled.
  const float max_scaled = best < 0 ? kNegInf : logits[static_cast<size_t>(best)] * inv_t;
  if (!std::isfinite(max_scaled)) return false;
  OverBlocks([&](int, size_t first, size_t end) {
    const size_t begin = BlockBegin(first);
    kernels_.exp_blocks(logits.data() + begin, inv_t, max_scaled, probs_.data() + begin,
                        block_sum_.data() + first, block_max_.data() + first,
                        static_cast<int64_t>(BlockEnd(end - 1) - begin));
  });
  double total = 0.0;
  for (float s : block_sum_) total += static_cast<double>(s);
  total_ = total;
  log_norm_ = static_cast<float>(static_cast<double>(max_scaled) + std::log(total));
  return true;
}

float Sampler::Logprob(size_t t) const {
  if (total_ <= 0.0) return kLowest;  // no finite logit
  const float s = logits_[t] * inv_t_;
  return s != s ? kLowest : std::max(s - log_norm_, kLowest);  // NaN: as -inf
}

int32_t Sampler::SampleUnfiltered(const SampleRowParams& params) {
  const double target = RequestRng(params.seed).Uniform(params.step) * total_;
  // The block holding the target first, then token by token from its start (on into the next
  // blocks if rounding left the target past the block's own tokens).
  double cumulative = 0.0;
  size_t b = 0;
  for (; b + 1 < block_sum_.size(); ++b) {
    const double next = cumulative + static_cast<double>(block_sum_[b]);
    if (next > target) break;
    cumulative = next;
  }
  const size_t n = static_cast<size_t>(vocab_size_);
  int32_t last_positive = -1;
  for (size_t i = BlockBegin(b); i < n; ++i) {
    if (probs_[i] <= 0.0f) continue;
    cumulative += static_cast<double>(probs_[i]);
    last_positive = static_cast<int32_t>(i);
    if (cumulative > target) return last_positive;
  }
  if (last_positive >= 0) return last_positive;  // rounding left the target beyond the total
  for (size_t i = BlockBegin(b); i-- > 0;) {
    if (probs_[i] > 0.0f) return static_cast<int32_t>(i);
  }
  return 0;
}

float Sampler::KthBlockMax(size_t k) {
  block_scratch_.assign(block_max_.begin(), block_max_.end());
  const auto kth = block_scratch_.begin() + static_cast<std::ptrdiff_t>(k - 1);
  std::nth_element(block_scratch_.begin(), kth, block_scratch_.end(), std::greater<float>());
  return *kth;
}

size_t Sampler::GatherAtLeast(float tau) {
  size_t count = 0;
  for (size_t b = 0; b < block_max_.size(); ++b) {
    if (block_max_[b] < tau) continue;
    const size_t begin = BlockBegin(b);
    count += static_cast<size_t>(
        kernels_.gather_at_least(probs_.data() + begin, static_cast<int64_t>(BlockEnd(b) - begin),
                                 tau, static_cast<int32_t>(begin), order_.data() + count));
  }
  return count;
}

size_t Sampler::GatherCandidates(const SampleRowParams& params, float p_max_float) {
  // Sorting the whole vocabulary is the slow part, so sort only the tokens with p >= tau, for a
  // tau low enough that the kept prefix provably lies inside that set: it holds all tokens that
  // pass min-p, or at least top_k tokens, or more than top_p of the mass (the first token after
  // it would have more than top_p before it). Start near the top and lower tau until one holds;
  // each try sums only the blocks whose largest value reaches tau.
  // One float step below the exact threshold: the candidate set may only be a superset.
  const float min_p_threshold =
      std::nextafter(static_cast<float>(static_cast<double>(p_max_float) * params.min_p), 0.0f);
  const size_t k = static_cast<size_t>(std::min<int64_t>(params.top_k, vocab_size_));
  // The mass test must hold despite the float sums' rounding: ask for a little more.
  const double top_p_mass = params.top_p * total_ * (1.0 + 1e-5);
  // Tokens of probability 0 (masked, or below exp's range) can never be drawn: never gather them.
  constexpr float kPositive = std::numeric_limits<float>::denorm_min();
  if (k <= kDirectTopK && k <= block_max_.size()) {
    // A small top_k: the k-th largest block maximum is a threshold that at least k tokens reach
    // (each of those blocks has one), so it needs no counting pass.
    return GatherAtLeast(std::max({KthBlockMax(k), min_p_threshold, kPositive}));
  }
  const float floor_tau = p_max_float * 1e-12f;
  float tau = std::max(min_p_threshold, p_max_float * 0.25f);
  while (tau > 0.0f) {
    size_t count = 0;
    double mass = 0.0;
    for (size_t b = 0; b < block_max_.size(); ++b) {
      if (block_max_[b] < tau) continue;
      const size_t begin = BlockBegin(b);
      int64_t in = 0;
      mass += static_cast<double>(kernels_.sum_at_least(
          probs_.data() + begin, static_cast<int64_t>(BlockEnd(b) - begin), tau, &in));
      count += static_cast<size_t>(in);
    }
    if (tau <= min_p_threshold || count >= k || mass > top_p_mass) break;
    tau = tau * 0.125f;
    if (tau < floor_tau) tau = std::max(min_p_threshold, 0.0f);
    if (tau <= 0.0f) break;
  }
  return GatherAtLeast(std::max(tau, kPositive));
}

int32_t Sampler::SampleFiltered(const SampleRowParams& params) {
  // probs_ are p * total_: thresholds relative to p_max need no change, masses are scaled.
  const float p_max = *std::max_element(block_max_.begin(), block_max_.end());
  const double min_p_threshold = static_cast<double>(p_max) * params.min_p;
  const double top_p_mass = params.top_p * total_;
  size_t kept = 0;
  const auto first = order_.begin();
  if (params.top_k >= vocab_size_ && params.top_p >= 1.0) {
    // min-p alone keeps a set, not a prefix: no sort needed. Gather from one float step below
    // the threshold, then apply it exactly.
    const size_t count = GatherAtLeast(std::nextafter(static_cast<float>(min_p_threshold), 0.0f));
    for (size_t i = 0; i < count; ++i) {
      const int32_t id = order_[i];
      if (static_cast<double>(probs_[static_cast<size_t>(id)]) >= min_p_threshold) {
        order_[kept++] = id;
      }
    }
  } else {
    const size_t count = GatherCandidates(params, p_max);
    const size_t k =
        std::min(count, static_cast<size_t>(std::min<int64_t>(params.top_k, vocab_size_)));
    ByProbDesc cmp{probs_.data()};
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
      if (kept > 0 && (before > top_p_mass || p < min_p_threshold)) break;
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
  out.logprob = Logprob(static_cast<size_t>(out.token_id));
  out.top_logprobs.clear();
  if (params.top_logprobs_num > 0) {
    const size_t k = std::min<size_t>(static_cast<size_t>(params.top_logprobs_num),
                                      static_cast<size_t>(vocab_size_));
    // Candidates from the block maxima as for top_k: at least k tokens reach the k-th largest,
    // and a token ranked higher by logprob has at least its probability, up to exp's rounding
    // (the margin). Without finite probabilities, the whole vocabulary.
    size_t count = 0;
    if (total_ > 0.0 && k <= kDirectTopK && k <= block_max_.size()) {
      const float kth = KthBlockMax(k);
      if (kth > 0.0f) count = GatherAtLeast(kth * (1.0f - 1e-5f));
    }
    if (count < k) {
      std::iota(order_.begin(), order_.end(), 0);
      count = order_.size();
    }
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k),
                      order_.begin() + static_cast<std::ptrdiff_t>(count),
                      [this](int32_t a, int32_t b) {
                        const float la = Logprob(static_cast<size_t>(a));
                        const float lb = Logprob(static_cast<size_t>(b));
                        return la != lb ? la > lb : a < b;
                      });
    for (size_t i = 0; i < k; ++i) {
      out.top_logprobs.push_back({order_[i], Logprob(static_cast<size_t>(order_[i]))});
    }
  }
  out.token_ids_logprobs.clear();
  for (int32_t id : params.token_ids_logprob) {
    RADIX_CHECK_MSG(id >= 0 && id < vocab_size_, "token_ids_logprob must be validated");
    out.token_ids_logprobs.push_back(Logprob(static_cast<size_t>(id)));
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
  if (!greedy || with_logprobs) finite = ComputeProbs(logits, params.temperature);
  out.entropy = 0.0f;
  if (params.return_entropy && finite) {
    double sum = 0.0;
    for (int32_t v = 0; v < vocab_size_; ++v) {
      const auto i = static_cast<size_t>(v);
      if (probs_[i] > 0.0f) sum -= static_cast<double>(probs_[i]) * Logprob(i);
    }
    out.entropy = static_cast<float>(sum / total_);
  }
  if (greedy || !finite) {
    const int64_t best = Argmax(logits);
    out.token_id = best < 0 ? 0 : static_cast<int32_t>(best);  // every logit NaN: 0
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
  (void)ComputeProbs(logits, params.temperature);
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

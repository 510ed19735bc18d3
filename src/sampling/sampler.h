// Sampler: picks the next token of each row from processed logits (see LogitsProcessor) and
// reports its logprobs. Per row, with T = the normalized temperature (SamplingParams maps
// temperature < 1e-6 to T = 1 and top_k = 1):
//   * distribution  p = softmax(logits / T)
//   * greedy (top_k <= 1): token = argmax(logits); ties go to the LOWEST token id.
//   * otherwise SGLang's sort-based filter (pytorch backend): sort p descending (ties: lower id
//     first) and keep the longest prefix whose members satisfy all of
//       rank < top_k;  (cumulative p of the tokens before it) <= top_p;  p >= p_max * min_p,
//     then draw by inverse CDF over the kept tokens (renormalized), walked in ascending token id
//     order, with the row's uniform u = RequestRng(seed).Uniform(step): the first kept token
//     whose cumulative mass exceeds u * kept_mass. The result depends only on (logits, params,
//     seed, step), never on the batch.
//   * logprobs (and the entropy, when asked) are taken from p, i.e. AFTER temperature and BEFORE
//   top-k/top-p/min-p truncation
//     (SGLang's default). Greedy requests (temperature < 1e-6) have T = 1, so theirs are
//     log_softmax(processed logits); a top_k = 1 request with T != 1 uses its T whatever the
//     batch (SGLang would drop T when the whole batch is greedy). -inf (masked) becomes the
//     lowest finite float, as SGLang clamps to the dtype minimum.
// The passes over the vocabulary (argmax, exponentials, candidate thresholds) run on the
// KernelTable's sampler primitives; the exponentials are kept unnormalized (largest ~1) with
// their total, and blocks of kernels::kExpBlock tokens carry a sum and a largest value, so the
// inverse-CDF draw finds its block first and truncation skips blocks below its threshold. Sums
// are in a fixed order per variant, so a row's result does not depend on the batch.
// With a pool, a long row's argmax and exponentials run on all its threads, each over whole
// blocks (the same bits as one thread).
// Thread affinity: one instance per engine thread (reuses scratch buffers; no per-token heap
// allocation once outputs have reached their capacity); the pool, if any, belongs to that thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/kernel_table.h"
#include "sampling/sampling_params.h"

namespace radixserve::sampling {

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

// Per-row sampling inputs (a flat view of SamplingParams plus the row's RNG position).
struct SampleRowParams {
  double temperature = 1.0;  // > 0 (already normalized)
  int64_t top_k = kTopKAll;  // >= 1; <= 1 means greedy
  double top_p = 1.0;        // (0, 1]
  double min_p = 0.0;        // [0, 1]
  uint64_t seed = 0;         // request seed (SamplingParams::sampling_seed or a SeedSource draw)
  uint64_t step = 0;         // number of tokens this sequence generated before this one
  // false: SampleRow skips every logprob (greedy rows then cost one argmax pass) and leaves the
  // logprob fields of SampleOutput zero/empty.
  bool return_logprob = true;
  // Report the entropy of p (SampleOutput::entropy).
  bool return_entropy = false;
  int32_t top_logprobs_num = 0;                // alternatives to report (0: none)
  std::span<const int32_t> token_ids_logprob;  // ids whose logprobs to report; in vocab range

  static SampleRowParams From(const SamplingParams& params, uint64_t seed, uint64_t step);
};

// Results for one row. Vectors are cleared and refilled; keep the object across steps so their
// capacity is reused.
struct SampleOutput {
  int32_t token_id = 0;
  float logprob = 0.0f;                    // of token_id
  std::vector<TokenLogprob> top_logprobs;  // best first; ties: lower id first
  std::vector<float> token_ids_logprobs;   // aligned with SampleRowParams::token_ids_logprob
  // With return_entropy: -sum p log p (nats) over the distribution the logprobs come from (after
  // temperature, before truncation); 0 for a row without a finite logit.
  float entropy = 0.0f;
};

class Sampler {
 public:
  explicit Sampler(int32_t vocab_size,
                   const kernels::KernelTable& kernels = kernels::ActiveKernels(),
                   ThreadPool* pool = nullptr);

  void SampleRow(std::span<const float> logits, const SampleRowParams& params, SampleOutput& out);

  // Logprobs of a given `token_id` (and the alternatives `params` asks for) under
  // log_softmax(logits / params.temperature), without drawing anything. Prompt logprobs use it
  // with temperature 1 (SGLang's input logprobs are raw log_softmax). Sampling fields of
  // `params` other than temperature are ignored.
  void ScoreRow(std::span<const float> logits, int32_t token_id, const SampleRowParams& params,
                SampleOutput& out);

  // Row-major [params.size(), vocab_size] logits; outputs.size() == params.size(). Rows run one
  // after another; to spread a batch over cores give each worker its own Sampler and a row
  // range (results do not depend on how rows are split).
  void SampleBatch(std::span<const float> logits, std::span<const SampleRowParams> params,
                   std::span<SampleOutput> outputs);

  int32_t vocab_size() const { return vocab_size_; }

 private:
  // Fills probs_ with exp(logits / temperature - max) (p times total_, total_ their sum) with
  // block_sum_ / block_max_, and keeps what Logprob needs (the logits stay the caller's until the
  // row is done). If the largest logit is not finite (all -inf, or +inf present) returns false
  // with total_ 0, probs_ and the blocks left as they were (nothing reads them then) and every
  // logprob the lowest float; the row then falls back to argmax. NaN logits count as -inf.
  bool ComputeProbs(std::span<const float> logits, double temperature);
  // log p of token t for the row ComputeProbs last saw, computed when asked (a row's logprobs
  // need a few tokens, not the vocabulary): logit / T - log_norm_, at least the lowest float.
  float Logprob(size_t t) const;
  // A top_k (or top_logprobs_num) up to this many takes its candidates from the block maxima in
  // one pass.
  static constexpr size_t kDirectTopK = 256;
  // Puts into order_[0, count) every token that can survive truncation; returns count.
  size_t GatherCandidates(const SampleRowParams& params, float p_max_float);
  // The k-th largest of block_max_ (1 <= k <= its size): at least k tokens reach it.
  float KthBlockMax(size_t k);
  // The tokens with probs_ >= tau (from the blocks whose largest value reaches it) into order_,
  // in id order; returns how many.
  size_t GatherAtLeast(float tau);
  // Index of the largest logit, lowest on ties, NaN never winning; -1 if every one is NaN.
  int64_t Argmax(std::span<const float> logits);
  // Runs fn(part, first_block, end_block) over the row's blocks: in parts on the pool's threads
  // when the row is long enough, else as one part.
  template <typename Fn>
  void OverBlocks(Fn&& fn);
  // Tokens [begin, end) of block b.
  size_t BlockBegin(size_t b) const { return b * static_cast<size_t>(kernels::kExpBlock); }
  size_t BlockEnd(size_t b) const;
  int32_t SampleFiltered(const SampleRowParams& params);
  int32_t SampleUnfiltered(const SampleRowParams& params);
  void FillLogprobOutputs(const SampleRowParams& params, SampleOutput& out);

  int32_t vocab_size_;
  const kernels::KernelTable& kernels_;
  ThreadPool* pool_;
  std::vector<int64_t> part_best_;    // scratch: each part's argmax
  std::vector<float> probs_;          // scratch: p * total_ for the current row (largest ~1)
  std::vector<float> block_sum_;      // scratch: per block of kExpBlock tokens, the sum of probs_
  std::vector<float> block_max_;      // ... and the largest of them
  std::vector<float> block_scratch_;  // scratch: block_max_ reordered
  // The current row, for Logprob: its logits, 1 / T, max + log(total) of the scaled logits.
  std::span<const float> logits_;
  float inv_t_ = 1.0f;
  float log_norm_ = 0.0f;
  double total_ = 0.0;  // the sum of block_sum_, in block order; 0 for a row with no finite logit
  std::vector<int32_t> order_;  // scratch: token ids, sorted by p for the current row
};

// Index of the largest logit, lowest index on ties (NaN never wins). Returns 0 if all are NaN.
int32_t ArgmaxLowestId(std::span<const float> logits,
                       const kernels::KernelTable& kernels = kernels::ActiveKernels());

}  // namespace radixserve::sampling

// Cost of drawing one token from a row of logits (Sampler::SampleRow) at the vocabulary sizes
// served models have, for the sampling settings clients send: greedy, plain temperature, top-p,
// top-k, min-p, and with logprobs. The logits are Gaussian (sigma 3, a spread like a language
// model's) with a few large values, so the truncating settings keep a realistic candidate set.
// Prints the best and mean microseconds per row over a batch of 32 rows.
//
//   sampler_bench [--threads N] [VOCAB...]   (default 1 thread; 49152 128256 151936 262144)
// With N > 1 the sampler splits a long row over a pool of N threads, as the server's does.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "run_timing.h"
#include "sampling/sampler.h"

namespace radixserve {
namespace {

struct Setting {
  const char* name;
  double temperature;
  int64_t top_k;
  double top_p;
  double min_p;
  bool logprobs;
  int32_t top_logprobs = 0;
};

constexpr Setting kSettings[] = {
    {"greedy", 1.0, 1, 1.0, 0.0, false},
    {"temperature 1", 1.0, sampling::kTopKAll, 1.0, 0.0, false},
    {"temperature 0.7 top_p 0.9", 0.7, sampling::kTopKAll, 0.9, 0.0, false},
    {"top_k 40", 1.0, 40, 1.0, 0.0, false},
    {"min_p 0.05", 1.0, sampling::kTopKAll, 1.0, 0.05, false},
    {"temperature 1 + logprobs", 1.0, sampling::kTopKAll, 1.0, 0.0, true},
    {"... + 5 top logprobs", 1.0, sampling::kTopKAll, 1.0, 0.0, true, 5},
};

void Run(int32_t vocab, ThreadPool* pool) {
  constexpr int kRows = 32;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(vocab) * kRows);
  for (float& x : logits) x = normal(rng);
  for (int r = 0; r < kRows; ++r) {
    for (int k = 0; k < 8; ++k) {
      logits[static_cast<size_t>(r) * vocab + rng() % static_cast<uint32_t>(vocab)] = 18.0f + k;
    }
  }
  sampling::Sampler sampler(vocab, kernels::ActiveKernels(), pool);
  sampling::SampleOutput out;
  long long checksum = 0;
  for (const Setting& s : kSettings) {
    uint64_t step = 0;
    const bench::RunSeconds t = bench::TimeRuns(5, [&] {
      for (int r = 0; r < kRows; ++r) {
        sampling::SampleRowParams p;
        p.temperature = s.temperature;
        p.top_k = s.top_k;
        p.top_p = s.top_p;
        p.min_p = s.min_p;
        p.seed = 42;
        p.step = step++;
        p.return_logprob = s.logprobs;
        p.top_logprobs_num = s.top_logprobs;
        sampler.SampleRow(std::span<const float>(logits).subspan(static_cast<size_t>(r) * vocab,
                                                                 static_cast<size_t>(vocab)),
                          p, out);
        checksum += out.token_id;
      }
    });
    std::printf("vocab %6d  %-28s best %8.1f  mean %8.1f us per row\n", vocab, s.name,
                t.best * 1e6 / kRows, t.mean * 1e6 / kRows);
  }
  std::printf("(checksum %lld)\n", checksum);
}

}  // namespace
}  // namespace radixserve

int main(int argc, char** argv) {
  std::vector<int32_t> vocabs;
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
      if (threads < 1) {
        std::fprintf(stderr, "sampler_bench: --threads must be at least 1\n");
        return 2;
      }
    } else {
      vocabs.push_back(std::atoi(argv[i]));
    }
  }
  radixserve::ThreadPool pool(threads);
  if (vocabs.empty()) vocabs = {49152, 128256, 151936, 262144};
  for (int32_t v : vocabs) {
    if (v <= 0) {
      std::fprintf(stderr, "sampler_bench: vocabulary size must be positive, got %d\n", v);
      return 2;
    }
    radixserve::Run(v, threads > 1 ? &pool : nullptr);
  }
  return 0;
}

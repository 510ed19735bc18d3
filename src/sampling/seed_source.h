// SeedSource: the server-wide generator that gives a seed to every request that did not bring its
// own (`sampling_seed` / OpenAI `seed`). Seeded once from --random-seed (SGLang: random in
// [0, 2^30] when unset), so a server started with the same --random-seed hands out the same
// sequence of request seeds in admission order.
// Under --enable-deterministic-inference an unseeded request uses SGLang's default sampling_seed
// (42) instead, so the same request always produces the same output, as in SGLang.
// Thread affinity: owned and called by one engine thread (not synchronized).
#pragma once

#include <cstdint>
#include <optional>

namespace radixserve::sampling {

// SGLang's SamplingParams.sampling_seed default (used only in deterministic mode).
inline constexpr uint64_t kDeterministicDefaultSeed = 42;

class SeedSource {
 public:
  explicit SeedSource(uint64_t random_seed, bool deterministic_inference = false)
      : state_(random_seed), deterministic_inference_(deterministic_inference) {}

  // The next request seed (successive SplitMix64 outputs).
  uint64_t NextRequestSeed();

  // The seed a newly admitted request samples with: its own if it set one, else
  // kDeterministicDefaultSeed in deterministic mode, else NextRequestSeed().
  uint64_t SeedFor(std::optional<uint64_t> requested);

 private:
  uint64_t state_;
  uint64_t drawn_ = 0;
  bool deterministic_inference_;
};

}  // namespace radixserve::sampling

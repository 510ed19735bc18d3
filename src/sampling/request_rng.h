// RequestRng: the per-request random stream used by the sampler. Counter-based: the uniform for
// decode step `step` is a pure function of (seed, step), so a seeded request draws the same numbers
// whatever else is in the batch, after retraction and recompute, and on any DP replica.
//
// Construction: SplitMix64 (Steele, Lea, Flood 2014, as in Vigna's reference splitmix64.c). Its
// k-th output for state s is Mix64(s + k * golden_gamma); we key the state with Mix64(seed) so that
// nearby seeds do not give shifted copies of one stream. Value type; not thread-affine.
#pragma once

#include <cstdint>

namespace radixserve::sampling {

// SplitMix64's finalizer (a bijection on 64-bit values).
uint64_t Mix64(uint64_t x);

// Output number `index` (0-based) of Vigna's splitmix64 generator started from `state`.
uint64_t SplitMix64At(uint64_t state, uint64_t index);

class RequestRng {
 public:
  explicit RequestRng(uint64_t seed) : key_(Mix64(seed ^ kSeedSalt)) {}

  // 64 random bits for decode step `step` (number of tokens generated before this one).
  uint64_t Bits(uint64_t step) const { return SplitMix64At(key_, step); }
  // Uniform double in [0, 1) with 53 random bits.
  double Uniform(uint64_t step) const { return static_cast<double>(Bits(step) >> 11) * 0x1.0p-53; }

 private:
  static constexpr uint64_t kSeedSalt = 0x5EEDC0DE2A1B3C4DULL;
  uint64_t key_;
};

// Seed of parallel sample `index` (n > 1) of a request seeded with `seed`: index 0 keeps the seed,
// the others get distinct derived seeds, so n samples differ but each is reproducible.
uint64_t DeriveSampleSeed(uint64_t seed, uint64_t index);

}  // namespace radixserve::sampling

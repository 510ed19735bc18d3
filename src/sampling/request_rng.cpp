#include "sampling/request_rng.h"

namespace radixserve::sampling {

namespace {
constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;
}  // namespace

uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t SplitMix64At(uint64_t state, uint64_t index) {
  return Mix64(state + (index + 1) * kGoldenGamma);
}

uint64_t DeriveSampleSeed(uint64_t seed, uint64_t index) {
  if (index == 0) return seed;
  return Mix64(seed + Mix64(index));
}

}  // namespace radixserve::sampling

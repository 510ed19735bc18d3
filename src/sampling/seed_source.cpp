#include "sampling/seed_source.h"

#include "sampling/request_rng.h"

namespace radixserve::sampling {

uint64_t SeedSource::NextRequestSeed() { return SplitMix64At(state_, drawn_++); }

uint64_t SeedSource::SeedFor(std::optional<uint64_t> requested) {
  if (requested) return *requested;
  if (deterministic_inference_) return kDeterministicDefaultSeed;
  return NextRequestSeed();
}

}  // namespace radixserve::sampling

// The token tiling the float GEMM kernels share (AVX2 and AVX-512): a block of weight rows meets
// the tokens in tiles of a fixed size, then one tile of the tokens left. Each ISA keeps its own
// tile (registers per vector) and its own row blocking; this is the part they have in common.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace radixserve::kernels::x86 {

// Calls run(std::integral_constant<int, T>{}, t) for token tiles [t, t + T) covering [0, n):
// tiles of kTile tokens, then one tile of the 1 .. kTile - 1 left (T is a compile-time size).
template <int kTile, typename Run>
inline void ForEachTokenTileOf(int64_t n, Run&& run) {
  int64_t t = 0;
  for (; t + kTile <= n; t += kTile) run(std::integral_constant<int, kTile>{}, t);
  const int64_t rest = n - t;
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((rest == I + 1 ? run(std::integral_constant<int, I + 1>{}, t) : void()), ...);
  }
  (std::make_integer_sequence<int, kTile - 1>{});
}

// The rows-as-stored tiles: 4 tokens, then 3, 2 or 1.
template <typename Run>
inline void ForEachTokenTile(int64_t n, Run&& run) {
  ForEachTokenTileOf<4>(n, run);
}

}  // namespace radixserve::kernels::x86

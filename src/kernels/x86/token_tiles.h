// The token tiling the float GEMM kernels share (AVX2 and AVX-512): a block of weight rows meets
// the tokens in tiles of 4, then one tile of the 3, 2 or 1 tokens left. Each ISA keeps its own
// tile (registers per vector) and its own row blocking; this is the part they have in common.
#pragma once

#include <cstdint>
#include <type_traits>

namespace radixserve::kernels::x86 {

// Calls run(std::integral_constant<int, T>{}, t) for token tiles [t, t + T) covering [0, n).
template <typename Run>
inline void ForEachTokenTile(int64_t n, Run&& run) {
  int64_t t = 0;
  for (; t + 4 <= n; t += 4) run(std::integral_constant<int, 4>{}, t);
  switch (n - t) {
    case 3:
      run(std::integral_constant<int, 3>{}, t);
      break;
    case 2:
      run(std::integral_constant<int, 2>{}, t);
      break;
    case 1:
      run(std::integral_constant<int, 1>{}, t);
      break;
    default:
      break;
  }
}

}  // namespace radixserve::kernels::x86

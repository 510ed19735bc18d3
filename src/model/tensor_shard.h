// TensorShard: which part of every attention and MLP layer this process holds under tensor
// parallelism (Megatron's split, as SGLang's --tp-size does it). Rank r of n holds query heads
// [r * heads / n, (r + 1) * heads / n) with their K/V heads and the matching rows of the Q/K/V
// projections and columns of the output projection, and rows [r * I / n, (r + 1) * I / n) of the
// gate/up projections with those columns of the down projection. The output and down
// projections then give partial sums over the shard's columns; `group` sums them over the ranks
// (all-reduce), so every rank continues with the full residual stream. Embeddings, norms and the
// LM head are replicated (only rank 0 computes logits).
#pragma once

#include <cstdint>

namespace radixserve::model {

// Sums buffers over every rank of a tensor-parallel group. Implemented by src/dist (over a
// collective library); called from the forward pass with the same sizes in the same order on
// every rank. A failure (a rank died or timed out) does not return: it ends the process.
class AllReducer {
 public:
  virtual ~AllReducer() = default;
  virtual void AllReduceSum(float* data, int64_t count) = 0;
};

struct TensorShard {
  int rank = 0;
  int size = 1;
  AllReducer* group = nullptr;  // not owned; non-null when size > 1

  bool sharded() const { return size > 1; }
};

}  // namespace radixserve::model

// TensorShard: which part of every attention and MLP layer this process holds under tensor
// parallelism (Megatron's split, as SGLang's --tp-size does it). Rank r of n holds query heads
// [r * heads / n, (r + 1) * heads / n) with their K/V heads and the matching rows of the Q/K/V
// projections and columns of the output projection, and rows [r * I / n, (r + 1) * I / n) of the
// gate/up projections with those columns of the down projection. The output and down
// projections then give partial sums over the shard's columns; `group` sums them over the ranks
// (all-reduce), so every rank continues with the full residual stream. Embeddings, norms and the
// LM head are replicated (only rank 0 computes logits).
//
// Mixture-of-experts layers (expert parallelism, SGLang's --ep-size): the ranks form ep_size
// blocks of size / ep_size consecutive ranks; block b holds experts [b * E / ep, (b + 1) * E / ep)
// and its ranks split each of those experts' rows as above (ep_size 1: every rank a share of every
// expert; ep_size == size: whole experts, none split). Every rank routes every token (the router
// is replicated) and computes the contributions of its own experts only; the shared experts are
// split over all ranks like a dense MLP; the sum over the ranks (all-reduce) is the layer's output.
// Multi-head latent attention splits the query heads; each rank keeps the whole compressed
// KV row (one per token, as SGLang's MLA under tensor parallelism).
//
// Pipeline parallelism (PipelineStage, SGLang's --pp-size): stage s of n holds a contiguous range
// of layers (StageLayers). Each step is cut into micro-batches of about equal token counts
// (MicroBatchCount; a sequence may be cut inside its extend range: the later piece attends to the
// earlier one's K/V, which every stage writes first). Stage 0 embeds each micro-batch, runs its
// layers and sends the residual stream on; stage s receives it, runs its layers and sends it on,
// so the stages work on different micro-batches at once. The last stage sends the rows whose
// logits or hidden states are wanted back to stage 0, which holds the final norm and the LM head
// (and samples: it is the server). Stages and tensor parallelism compose: every stage is a
// tensor-parallel group of its own, and a rank talks to the same tensor-parallel rank of the
// neighbouring stages.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

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
  int ep_size = 1;              // divides size

  bool sharded() const { return size > 1; }
  // This rank's expert block and its place in it (see above).
  int ep_rank() const { return rank / (size / ep_size); }
  int moe_tp_size() const { return size / ep_size; }
  int moe_tp_rank() const { return rank % (size / ep_size); }
};

// Carries residual-stream rows between pipeline stages (implemented by src/dist). Sends and
// receives between two ranks pair up in the order both call them. A failure does not return.
class StageLink {
 public:
  virtual ~StageLink() = default;
  // Queues `count` floats for this rank's peer in `stage`; `data` may be reused on return.
  virtual void SendTo(int stage, const float* data, int64_t count) = 0;
  virtual void ReceiveFrom(int stage, float* data, int64_t count) = 0;
  // Returns once every queued send was delivered.
  virtual void Flush() = 0;
};

struct PipelineStage {
  int rank = 0;
  int size = 1;
  StageLink* link = nullptr;  // not owned; non-null when size > 1
  // --pp-max-micro-batch-size: at most this many sequences per micro-batch of a decode step
  // (more micro-batches when a step holds more); 0: no limit.
  int64_t max_micro_batch_size = 0;

  bool split() const { return size > 1; }
};

// Layers [first, end) of stage `rank` of `size`: equal ranges, the first num_layers % size stages
// one layer more (stage 0, which also holds the LM head and the server, sizes the KV pool every
// stage allocates, so it holds the most layers).
inline std::pair<int64_t, int64_t> StageLayers(int64_t num_layers, int rank, int size) {
  const int64_t base = num_layers / size, extra = num_layers % size;
  const int64_t first = rank * base + std::min<int64_t>(rank, extra);
  return {first, first + base + (rank < extra ? 1 : 0)};
}

// How many micro-batches a step of `tokens` tokens over `sequences` sequences is cut into: one per
// stage (or per max_micro_batch_size sequences, when that is more), never more than tokens.
inline int64_t MicroBatchCount(const PipelineStage& stage, int64_t tokens, int64_t sequences) {
  int64_t count = stage.size;
  if (stage.max_micro_batch_size > 0) {
    count =
        std::max(count, (sequences + stage.max_micro_batch_size - 1) / stage.max_micro_batch_size);
  }
  return std::max<int64_t>(1, std::min(count, tokens));
}

}  // namespace radixserve::model

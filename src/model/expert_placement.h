// ExpertPlacement: which model expert each physical expert slot of one MoE layer holds, under
// expert parallelism with redundant replicas (SGLang's EPLB: --ep-num-redundant-experts,
// --init-expert-location, --enable-eplb, --ep-dispatch-algorithm).
//
// A layer has E logical experts (the checkpoint's) and P = E + R physical slots, R being the
// redundant replicas; P is a multiple of the expert-parallel blocks (--ep-size), and block b holds
// slots [b * P / blocks, (b + 1) * P / blocks) (tensor_shard.h). Every logical expert has at least
// one slot. The trivial placement puts slot s on expert s % E (SGLang's init_trivial). A balanced
// placement comes from each expert's recorded load by the DeepSeek EPLB algorithm's global policy
// (what SGLang's deepseek algorithm runs on one node): give the extra slots one by one to the
// expert with the highest load per replica, then pack the slots (heaviest first, each into the
// least loaded block that still has room) so the blocks carry loads as equal as possible.
//
// Dispatch: a token choosing logical expert j is computed by exactly one of j's replicas; every
// rank must pick the same one, since every rank routes every token and computes only its own
// slots. kStatic (SGLang's static): token t is taken as coming from block t % blocks, which uses
// its own replica of j when it has one and otherwise a fixed replica, the blocks without one being
// spread over j's replicas in turn. kDynamic: a replica drawn per (token, choice) from a hash of
// the layer's pass counter, the token and the choice (SGLang draws at random on each rank; here
// the draw must agree across ranks). kFake: SGLang's load-test mode: the router logits are
// replaced by draws uniform in [5, 10) (no correction bias), then dispatched as kDynamic; the
// model's output is then meaningless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace radixserve::model {

enum class ExpertDispatch { kStatic, kDynamic, kFake };

// What the server arguments ask of the MoE layers' placement (set by the loader; every rank of a
// tensor-parallel group gets the same).
struct ExpertPlacementOptions {
  int64_t redundant_experts = 0;  // --ep-num-redundant-experts
  ExpertDispatch dispatch = ExpertDispatch::kStatic;
  // --init-expert-location: per model layer (all num_layers, dense ones included), either the
  // slots' experts ([layer][P], SGLang's physical_to_logical_map) or the recorded load per expert
  // ([layer][E], SGLang's logical_count summed over its passes). Both empty: trivial.
  std::vector<std::vector<int32_t>> initial_map;
  std::vector<std::vector<double>> initial_load;
  // --enable-eplb: every rebalance_every passes of a layer, its placement is recomputed from the
  // choices of those passes, when their average balancedness (mean over max of the blocks' loads)
  // is at most min_utilization; layers_per_chunk > 0 staggers the layers, that many per pass.
  bool rebalance = false;
  int64_t rebalance_every = 1000;
  int64_t layers_per_chunk = 0;
  double min_utilization = 1.0;
};

class ExpertPlacement {
 public:
  ExpertPlacement() = default;

  // Slot s holds expert s % num_logical.
  static ExpertPlacement Trivial(int64_t num_logical, int64_t num_physical, int64_t blocks);
  // The given slots' experts; InvalidArgument (naming `what`) when an entry is out of range, the
  // size is not num_physical, or an expert has no slot.
  static Expected<ExpertPlacement> FromMap(std::vector<int32_t> physical_to_logical,
                                           int64_t num_logical, int64_t num_physical,
                                           int64_t blocks, const std::string& what);
  // The DeepSeek EPLB global policy over load[num_logical] (see the file comment).
  static ExpertPlacement Balanced(const std::vector<double>& load, int64_t num_physical,
                                  int64_t blocks);

  // This placement with each block's slots reordered so that as many slots as possible keep the
  // expert they hold in `now` (same slot and block counts): the blocks' loads are unchanged, and
  // a rebalance reloads fewer slots.
  ExpertPlacement KeepingSlotsOf(const ExpertPlacement& now) const;

  int64_t num_logical() const { return static_cast<int64_t>(replicas_.size()); }
  int64_t num_physical() const { return static_cast<int64_t>(physical_to_logical_.size()); }
  int64_t blocks() const { return blocks_; }
  int64_t slots_per_block() const { return num_physical() / blocks_; }
  int64_t BlockOf(int32_t slot) const { return slot / slots_per_block(); }
  const std::vector<int32_t>& physical_to_logical() const { return physical_to_logical_; }
  // Expert j's slots, ascending.
  const std::vector<int32_t>& Replicas(int32_t logical) const {
    return replicas_[static_cast<size_t>(logical)];
  }

  // The slot computing token t's choice `logical` (its k-th; `pass` is the layer's pass counter,
  // `salt` tells layers apart) under `dispatch`.
  int32_t Dispatch(ExpertDispatch dispatch, int32_t logical, int64_t t, int64_t k, int64_t pass,
                   uint64_t salt) const;

  // Mean over max of the blocks' loads when expert j's load[j] is split evenly over its replicas
  // (1 when balanced or when nothing was routed).
  double Balancedness(const std::vector<double>& load) const;

 private:
  void Derive();  // replicas_ and static_ from physical_to_logical_

  int64_t blocks_ = 1;
  std::vector<int32_t> physical_to_logical_;    // [P]
  std::vector<std::vector<int32_t>> replicas_;  // [E]
  std::vector<int32_t> static_;                 // [blocks * E]: kStatic's slot of (block, expert)
};

// Mean over max of the blocks' loads (1 when nothing was routed): SGLang's balancedness, without
// the recorder's log-line epsilon.
double BlockBalancedness(const std::vector<double>& block_load);

// A deterministic 64-bit mix (splitmix64's finalizer): the draws of kDynamic and kFake.
uint64_t MixBits(uint64_t x);

}  // namespace radixserve::model

// MoeFfn: one layer's mixture-of-experts feed-forward block (Qwen3-MoE; the router semantics of
// llama.cpp's build_moe_ffn with softmax gating). For each token: router logits = h * Wr^T,
// softmax over all experts, the top-k experts by probability (ties: lower index), their
// probabilities as weights (renormalized to sum 1 when norm_topk_prob); the output is
// sum_k w_k * down_k(silu(gate_k h) * up_k h), added in the token's top-k order, plus (Qwen2-MoE)
// a shared expert every token runs, scaled by sigmoid(shared_gate . h).
//
// gpt-oss (ModelConfig::moe_gating kTopKSoftmax, swiglu_limit > 0): the router and every expert
// projection carry a bias; the top k of the router's logits (ties: lower index) are softmaxed
// among themselves; the experts gate with the clamped SwiGLU (llama.cpp's swiglu_oai).
//
// DeepSeek (V2: softmax, V3: kSigmoid gating): the top k may be limited to the best groups of
// experts (ModelConfig::expert_groups), V3 chooses by sigmoid + a correction bias
// (exp_probs_b) but weights by the sigmoid alone, the weights are renormalized per
// norm_topk_prob and then multiplied by routed_scaling_factor; shared experts have no gate.
//
// Expert parallelism with redundant replicas (expert_placement.h): this rank computes the
// (token, k) pairs dispatched to its block's physical slots, each slot holding one expert's
// matrices (or this rank's rows of them); with --enable-eplb the layer counts its choices and,
// every rebalance_every passes, moves experts between slots by the recorded load, repacking the
// slots that change from the weight store at the start of a pass. Every rank of the group routes
// and dispatches identically, so they all rebalance at the same pass to the same placement.
//
// The expert GEMM groups the step's tokens by expert: each active expert multiplies all of its
// tokens in one MatMul per projection, so its weights are read once per step however many tokens
// chose it, and experts no token chose are not read at all. Each token's sum runs over its own
// k results in its own order and every matmul row is computed independently of the others, so
// a token's output does not depend on which other tokens share its step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/quant_matmul.h"
#include "model/expert_placement.h"
#include "model/lora_adapter.h"
#include "model/model_config.h"
#include "model/weight_store.h"

namespace radixserve::model {

struct ForwardScratch;

class MoeFfn {
 public:
  using PackFn = std::function<kernels::PackedWeight(const kernels::WeightMatrix&)>;
  // Columns [first, first + n) of a matrix (an owned copy; `name` for the error when they do not
  // hold whole blocks).
  using ColumnsFn = std::function<Expected<kernels::WeightMatrix>(
      const kernels::WeightMatrix&, int64_t first, int64_t n, const std::string& name)>;

  // Reads `<prefix>ffn_gate_inp.weight` (router, [experts, hidden]) and the experts'
  // ffn_gate_exps / ffn_up_exps ([experts, moe_intermediate, hidden]) and ffn_down_exps
  // ([experts, hidden, moe_intermediate]), stacked (GGUF) or per expert (HF); with a shared
  // expert also ffn_gate_inp_shexp ([hidden], HF [1, hidden]) and ffn_{gate,up,down}_shexp.
  // With the gpt-oss gating also the biases ffn_gate_inp.bias ([experts]) and
  // ffn_{gate,up,down}_exps.bias ([experts, rows]).
  // Under tensor parallelism (config.tensor_shard) only this rank's slots and rows are kept
  // (tensor_shard.h); `columns` cuts the shared experts' down projection. `layer` is the model's
  // layer index (the placement options' row). `pack` packs at load; `repack` when rebalancing
  // (it must stay callable for the layer's lifetime; `weights` must outlive it too).
  Status Load(const ModelConfig& config, int64_t layer, WeightStore& weights, const PackFn& pack,
              PackFn repack, const ColumnsFn& columns);

  // The slots' experts now (SGLang's physical_to_logical_map row of this layer).
  const ExpertPlacement& placement() const { return placement_; }

  // out[T, hidden] = MoE(h[T, hidden]); out may alias h. Buffers come from `s`; afterwards
  // s.moe_choice holds each (token, k)'s expert and s.moe_slot its physical slot. Under tensor
  // parallelism: this rank's part (its slots' and its shared-expert rows' contributions), to be
  // summed over the ranks. Thread affinity: with --enable-eplb or a dispatch other than static,
  // one forward thread per model (a rebalance mutates the slots, the pass counter moves; replicas
  // sharing a model, --dp-size > 1, are refused then); otherwise any number of threads.
  // `lora` (may be null): the step's adapted token rows; their adapters' expert updates (routed
  // and shared, LoraAdapter::FindExpert / FindShared) are added to those tokens' projections.
  void Forward(const kernels::KernelTable& kt, ThreadPool* pool, const float* h, int64_t tokens,
               kernels::ActivationMode mode, ForwardScratch& s, float* out,
               const LoraRows* lora = nullptr) const;

 private:
  // Turns one token's router logits p[experts] into its top-k choice[k] and weight[k] (p then
  // holds the probabilities, select the selection scores).
  void Route(const kernels::KernelTable& kt, float* p, float* select, int32_t* choice,
             float* weight, bool use_selection_bias) const;
  // One physical slot of this rank: its expert and that expert's matrices (this rank's rows;
  // `down_columns` owns the down projection's column shard when the rows are split).
  struct Slot {
    int32_t expert = -1;
    kernels::PackedWeight gate, up, down;
    std::vector<uint8_t> down_columns;
  };
  // Loads expert `expert` into local slot `slot` (packing with `pack`).
  Status FillSlot(size_t slot, int32_t expert, const PackFn& pack) const;
  // --enable-eplb, at a pass a rebalance is due: the new placement and the slots it changes.
  void Rebalance() const;
  // Keeps this pass's choices (dispatched to `slot`) for the next rebalance.
  void CountPass(const int32_t* choice, const int32_t* slot, int64_t pairs) const;
  // One token's LoRA updates of an expert's gate and up rows (input x).
  static void AddGateUpLora(const kernels::KernelTable& kt, const ExpertLora& lora, const float* x,
                            float* gate, float* up);
  // Adds bias row `e` ([rows] of a [experts, rows] table; none when empty) to `n` rows of y.
  static void AddBias(const kernels::KernelTable& kt, const std::vector<float>& bias, int64_t e,
                      int64_t rows, float* y, int64_t n);
  // gate[i] = swiglu_oai(gate[i], up[i]) for i < n (see the class comment).
  void SwigluOai(float* gate, const float* up, int64_t n) const;

  int64_t experts_ = 0, top_k_ = 0, hidden_ = 0, inter_ = 0;  // inter_: this rank's rows
  int64_t layer_ = 0;
  int64_t row0_ = 0;  // this rank's first row of each expert
  int64_t moe_tp_size_ = 1;
  std::string prefix_;  // blk.N.
  std::string exps_;    // the experts' tensor suffix (_exps, or none in older Mixtral GGUFs)
  ExpertPlacementOptions options_;
  // The slots' experts, this rank's first slot, and its slots (placement_ and slots_ change when a
  // rebalance runs at the start of a pass; see Forward's thread affinity).
  mutable ExpertPlacement placement_;
  int64_t slot0_ = 0;
  mutable std::vector<Slot> slots_;
  // Every expert's whole matrices as the weight store holds them (slots are filled from them).
  std::vector<kernels::WeightMatrix> gate_src_, up_src_, down_src_;
  PackFn repack_;
  // Passes so far (counted with --enable-eplb or a dispatch other than static, whose draws use
  // it); --enable-eplb's window: the pass of the
  // next rebalance, each expert's choices and the sum of the passes' balancedness since the last
  // one (length passes).
  struct Window {
    int64_t passes = 0, due = 0, length = 0;
    std::vector<double> load;
    double balancedness = 0;
  };
  mutable Window window_;
  bool norm_topk_prob_ = false;
  ModelConfig::MoeGating gating_ = ModelConfig::MoeGating::kSoftmax;
  float swiglu_limit_ = 0.0f, swiglu_alpha_ = 0.0f;
  float routed_scale_ = 1.0f;
  static constexpr int64_t kMaxGroups = 64;
  int64_t groups_ = 1, groups_used_ = 1;
  ModelConfig::MoeGroupScore group_score_ = ModelConfig::MoeGroupScore::kTopTwoSum;
  // DeepSeek-V3: added to the probabilities to choose the experts, not to weight them.
  std::vector<float> selection_bias_;
  kernels::PackedWeight router_;
  // gpt-oss: router bias [experts]; every expert's biases of this rank's rows [experts, inter_]
  // (gate, up), [experts, hidden] (down; empty on ranks that do not hold an expert's first rows).
  std::vector<float> router_bias_, gate_bias_, up_bias_, down_bias_;
  int64_t shared_inter_ = 0;  // 0: no shared expert
  std::vector<float> shared_gate_;
  kernels::PackedWeight shared_gate_proj_, shared_up_, shared_down_;
};

}  // namespace radixserve::model

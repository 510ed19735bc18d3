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
  // Under tensor parallelism (config.tensor_shard) only this rank's experts and rows are kept
  // (tensor_shard.h); `columns` cuts the down projections' columns.
  Status Load(const ModelConfig& config, const std::string& prefix, WeightStore& weights,
              const PackFn& pack, const ColumnsFn& columns);

  // out[T, hidden] = MoE(h[T, hidden]); out may alias h. Buffers come from `s`. Under tensor
  // parallelism: this rank's part (its experts' and its shared-expert rows' contributions), to be
  // summed over the ranks.
  void Forward(const kernels::KernelTable& kt, ThreadPool* pool, const float* h, int64_t tokens,
               kernels::ActivationMode mode, ForwardScratch& s, float* out) const;

 private:
  // Turns one token's router logits p[experts] into its top-k choice[k] and weight[k] (p then
  // holds the probabilities, select the selection scores).
  void Route(const kernels::KernelTable& kt, float* p, float* select, int32_t* choice,
             float* weight) const;
  // Adds bias row `e` ([rows] of a [experts, rows] table; none when empty) to `n` rows of y.
  static void AddBias(const kernels::KernelTable& kt, const std::vector<float>& bias, int64_t e,
                      int64_t rows, float* y, int64_t n);
  // gate[i] = swiglu_oai(gate[i], up[i]) for i < n (see the class comment).
  void SwigluOai(float* gate, const float* up, int64_t n) const;

  int64_t experts_ = 0, top_k_ = 0, hidden_ = 0, inter_ = 0;  // inter_: this rank's rows
  int64_t e0_ = 0, e1_ = 0;  // this rank's experts; gate_, up_, down_ hold experts e0_ + i
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
  // gpt-oss: router bias [experts]; this rank's experts' biases [e1_ - e0_, inter_] (gate, up),
  // [e1_ - e0_, hidden] (down; empty on ranks that do not hold an expert's first rows).
  std::vector<float> router_bias_, gate_bias_, up_bias_, down_bias_;
  std::vector<kernels::PackedWeight> gate_, up_, down_;
  int64_t shared_inter_ = 0;  // 0: no shared expert
  std::vector<float> shared_gate_;
  kernels::PackedWeight shared_gate_proj_, shared_up_, shared_down_;
};

}  // namespace radixserve::model

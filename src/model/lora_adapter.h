// LoraAdapter: a low-rank update of a decoder's projections, y = W x + scale * B (A x), read from
// a PEFT folder (adapter_config.json + adapter_model.safetensors) or a GGUF LoRA file as
// llama.cpp's convert_lora_to_gguf.py writes it (general.type "adapter", adapter.type "lora",
// tensors "blk.N.attn_q.weight.lora_a" / ".lora_b").
//
// Targets are the seven projections of a DecoderStack layer (q/k/v/o, gate/up/down), and for
// multi-head latent attention (DeepSeek-V2/V3) its projections q_proj or q_a_proj / q_b_proj,
// kv_a_proj_with_mqa, kv_b_proj and o_proj (MlaAttention applies kv_b_proj's update in the
// absorbed form: through the queries' latent for the keys, after the latent output for the
// values). A is kept
// [rank, in] and B transposed, [rank, out], in float32 whatever the file stored (any format GGUF or
// safetensors weights load in). PEFT's scale is lora_alpha / r (lora_alpha / sqrt(r) with
// use_rslora); GGUF's is adapter.lora.alpha / rank of each matrix pair (1 when the alpha is 0, as
// llama.cpp does). Q/K rows of B are permuted when the adapter was written
// for the other rotary layout than the base checkpoint (PEFT adapters follow HF's rotate-half rows;
// a GGUF adapter of a "llama" architecture model follows llama.cpp's interleaved rows).
//
// Mixture-of-experts layers take adapters on their routed experts' gate/up/down projections, in
// both PEFT forms: one module per expert ("mlp.experts.E.gate_proj", Mixtral's
// "block_sparse_moe.experts.E.w1/w3/w2"), and PEFT's target_parameters on transformers' fused
// expert tensors ("mlp.experts.gate_up_proj" [experts, 2 x width, hidden], gate rows first, and
// "mlp.experts.down_proj"), whose lora_A stacks the experts' A matrices ([experts x r, in]) and
// whose lora_B interleaves their B columns (column k x experts + e is expert e's rank k); and on
// shared experts ("mlp.shared_expert" / "mlp.shared_experts") and DeepSeek's leading dense MLPs;
// GGUF LoRA files give the routed experts stacked, as llama.cpp's converter writes them
// ("blk.N.ffn_gate_exps.weight.lora_a" [experts, rank, in], lora_b [experts, out, rank]), and the
// shared experts as ffn_*_shexp.
// rank_pattern / alpha_pattern entries apply to the modules (or fused parameters) they match, as
// PEFT matches them (the pattern matches the module name's end after a dot).
//
// What is not a plain LoRA on those targets is refused with an error naming the file and the
// field: modules_to_save, DoRA, bias training, fan_in_fan_out, embedding or LM-head adapters, a
// rank above max_rank, shapes that do not fit the base model, and gpt-oss experts other than
// through the fused tensors (transformers' gpt-oss gate_up_proj is input-first with gate and up
// interleaved; PEFT's factors read the same, and the B rows are regrouped gate first at load).
// Immutable after Load; shared by requests in flight.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "kernels/kernel_table.h"
#include "kernels/rope.h"
#include "kernels/weight_format.h"
#include "model/model_config.h"

namespace radixserve::model {

enum class LoraTarget : int { kQ = 0, kK, kV, kO, kGate, kUp, kDown, kQa, kQb, kKvA, kKvB };
inline constexpr int kLoraTargetCount = 11;

// gate / up / down (an MLP's; the others are the attention's).
inline bool IsMlpTarget(LoraTarget t) {
  return t == LoraTarget::kGate || t == LoraTarget::kUp || t == LoraTarget::kDown;
}
// The projections only multi-head latent attention has.
inline bool IsMlaOnlyTarget(LoraTarget t) { return t >= LoraTarget::kQa; }

// SGLang's module names: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, and
// MLA's q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj.
const char* LoraTargetName(LoraTarget target);
// The target a module name (HF "q_proj", or SGLang's "qkv_proj" / "gate_up_proj" groups
// expanded by the caller) stands for; nullopt for anything else.
std::optional<LoraTarget> LoraTargetFromName(const std::string& name);

struct LoraWeights {
  int64_t rank = 0;
  int64_t in = 0, out = 0;
  float scale = 1.0f;      // multiplies B (A x)
  std::vector<float> a;    // [rank, in]
  std::vector<float> b_t;  // B transposed: [rank, out] (each rank's output column, contiguous)
  // An adapter whose file holds both matrices in F16 (or both in BF16) keeps them so, halving
  // what a step reads: `half` names the format, a16 / b_t16 hold what a / b_t would (those are
  // then empty). Converted on the fly, the products equal the float32 path's.
  kernels::WeightFormat half = kernels::WeightFormat::kF32;
  std::vector<uint16_t> a16, b_t16;

  // scale * (A_k . x): rank k's share of the shrink.
  float Shrink(const kernels::KernelTable& kt, int64_t k, const float* x) const {
    float dot = 0.0f;
    switch (half) {
      case kernels::WeightFormat::kF16:
        dot = kt.dot_f16(a16.data() + k * in, x, in);
        break;
      case kernels::WeightFormat::kBF16:
        dot = kt.dot_bf16(a16.data() + k * in, x, in);
        break;
      default:
        dot = kt.dot(a.data() + k * in, x, in);
    }
    return scale * dot;
  }
  // y += scale * B (A x): the whole update, rank after rank, in float32 on the calling thread.
  void Add(const kernels::KernelTable& kt, const float* x, float* y) const {
    for (int64_t k = 0; k < rank; ++k) Expand(kt, k, Shrink(kt, k, x), y);
  }
  // y += mid * (B^T)_k: rank k's share of the expand.
  void Expand(const kernels::KernelTable& kt, int64_t k, float mid, float* y) const {
    ExpandRange(kt, k, mid, 0, out, y);
  }
  // y[0, n) += mid * (B^T)_k[offset, offset + n): part of the expand.
  void ExpandRange(const kernels::KernelTable& kt, int64_t k, float mid, int64_t offset, int64_t n,
                   float* y) const {
    switch (half) {
      case kernels::WeightFormat::kF16:
        return kt.axpy_f16(mid, b_t16.data() + k * out + offset, y, n);
      case kernels::WeightFormat::kBF16:
        return kt.axpy_bf16(mid, b_t16.data() + k * out + offset, y, n);
      default:
        return kt.axpy(mid, b_t.data() + k * out + offset, y, n);
    }
  }
  // (B^T)_k[offset, offset + n) . x: the transposed product's rank k (no scale).
  float DotRange(const kernels::KernelTable& kt, int64_t k, int64_t offset, int64_t n,
                 const float* x) const {
    switch (half) {
      case kernels::WeightFormat::kF16:
        return kt.dot_f16(b_t16.data() + k * out + offset, x, n);
      case kernels::WeightFormat::kBF16:
        return kt.dot_bf16(b_t16.data() + k * out + offset, x, n);
      default:
        return kt.dot(b_t.data() + k * out + offset, x, n);
    }
  }
  // y[0, in) += mid * A_k: the transposed product's expand.
  void AxpyA(const kernels::KernelTable& kt, int64_t k, float mid, float* y) const {
    switch (half) {
      case kernels::WeightFormat::kF16:
        return kt.axpy_f16(mid, a16.data() + k * in, y, in);
      case kernels::WeightFormat::kBF16:
        return kt.axpy_bf16(mid, a16.data() + k * in, y, in);
      default:
        return kt.axpy(mid, a.data() + k * in, y, in);
    }
  }
};

// A mixture-of-experts layer's adapted expert: gate and up each, or both from one fused gate_up
// pair (out = 2 x the expert's width, gate rows first), and down. Empty when the adapter does not
// touch the expert.
struct ExpertLora {
  std::optional<LoraWeights> gate, up, gate_up, down;
  bool empty() const { return !gate && !up && !gate_up && !down; }
};

struct LoraLoadOptions {
  // The base model's rotary row order (ignored with multi-head latent attention, whose HF and
  // GGUF rows are in the same order).
  kernels::RopeLayout base_rope_layout = kernels::RopeLayout::kRotateHalf;
  bool moe = false;      // the base model's MLPs are mixtures of experts (no MLP targets)
  int64_t max_rank = 0;  // > 0: refuse adapters of a larger rank (--max-lora-rank)
  // Non-empty: refuse adapters touching other targets (--lora-target-modules).
  std::vector<LoraTarget> allowed_targets;
};

class LoraAdapter {
 public:
  // `path`: a PEFT folder, its adapter_config.json, or a .gguf LoRA file.
  static Expected<std::shared_ptr<const LoraAdapter>> Load(const std::string& path,
                                                           const ModelConfig& config,
                                                           const LoraLoadOptions& options);

  // Null when the adapter does not touch this layer's target.
  const LoraWeights* Find(int64_t layer, LoraTarget target) const {
    const auto& slot = layers_[static_cast<size_t>(layer)][static_cast<size_t>(target)];
    return slot ? &*slot : nullptr;
  }
  // Routed expert `expert` of MoE layer `layer`, or the layer's shared experts; null when the
  // adapter does not touch it.
  const ExpertLora* FindExpert(int64_t layer, int64_t expert) const {
    const auto& experts = experts_[static_cast<size_t>(layer)];
    if (experts.empty() || experts[static_cast<size_t>(expert)].empty()) return nullptr;
    return &experts[static_cast<size_t>(expert)];
  }
  const ExpertLora* FindShared(int64_t layer) const {
    const ExpertLora& shared = shared_[static_cast<size_t>(layer)];
    return shared.empty() ? nullptr : &shared;
  }
  // The largest rank of its matrices.
  int64_t rank() const { return rank_; }
  const std::vector<LoraTarget>& targets() const { return targets_; }
  int64_t bytes() const { return bytes_; }
  const std::string& format() const { return format_; }  // "peft" or "gguf"

 private:
  LoraAdapter() = default;
  Status LoadPeft(const std::string& dir, const ModelConfig& config,
                  const LoraLoadOptions& options);
  Status LoadGguf(const std::string& path, const ModelConfig& config,
                  const LoraLoadOptions& options);
  // Checks shapes against the base model, applies the rotary row order to `b` ([out, rank], as
  // files hold it), stores it transposed and records the target.
  Status Place(const std::string& file, int64_t layer, LoraTarget target, LoraWeights weights,
               std::vector<float> b, kernels::WeightFormat stored, const ModelConfig& config,
               const LoraLoadOptions& options, kernels::RopeLayout adapter_layout);

  // Checks the limits (--lora-target-modules, --max-lora-rank) and that `w` is [out, in]; then
  // stores B ([out, rank] as files hold it) transposed, narrowed back to 16 bits when `stored`
  // says the file held both matrices so, and counts the matrices.
  Status Finish(const std::string& where, std::initializer_list<LoraTarget> targets, LoraWeights& w,
                const std::vector<float>& b, kernels::WeightFormat stored, int64_t in, int64_t out,
                const LoraLoadOptions& options);
  // A MoE layer's expert (expert < 0: its shared experts) gets `w` for `target` (kGate with
  // gate_up: the fused gate and up).
  Status PlaceExpert(const std::string& file, int64_t layer, int64_t expert, LoraTarget target,
                     bool gate_up, LoraWeights w, const std::vector<float>& b,
                     kernels::WeightFormat stored, const ModelConfig& config,
                     const LoraLoadOptions& options);

  std::vector<std::array<std::optional<LoraWeights>, kLoraTargetCount>> layers_;
  std::vector<std::vector<ExpertLora>> experts_;  // [layer][expert]; empty: none adapted
  std::vector<ExpertLora> shared_;                // [layer]
  std::vector<LoraTarget> targets_;
  int64_t rank_ = 0;
  int64_t bytes_ = 0;
  std::string format_;
};

// One step's adapted rows: rows[i] carries adapters[i] (rows of sequences without an adapter are
// not listed).
struct LoraRows {
  std::span<const int32_t> rows;
  std::span<const LoraAdapter* const> adapters;
  size_t size() const { return rows.size(); }
};

// Runs fn(begin, end) over indices [0, rows.size()) of the adapted rows, each row's update on
// one thread: on the caller for one row (or without a pool), else one row per pool job.
template <typename Fn>
void ForEachLoraRow(ThreadPool* pool, const LoraRows& rows, Fn&& fn) {
  const auto n = static_cast<int64_t>(rows.size());
  if (n == 1 || pool == nullptr || pool->size() == 1) {
    fn(int64_t{0}, n);
  } else {
    pool->ParallelFor(n, 1, fn);
  }
}

// One LoRA output: rows t of `target`'s projection at y + t * stride.
struct LoraOut {
  LoraTarget target;
  float* y;
  int64_t stride;
};

// Adds each adapted row's scale * B (A x_t) for every target in `outs` (projections of the same
// input x [T, in], row t at x + t * in) of `layer` to its output. A row's update runs on one
// thread, rank after rank, in float32: it does not depend on the batch the row is in.
void ApplyLoraRows(const kernels::KernelTable& kt, ThreadPool* pool, const LoraRows& rows,
                   int64_t layer, const float* x, std::initializer_list<LoraOut> outs);

}  // namespace radixserve::model

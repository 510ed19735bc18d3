#include "model/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "model/for_rows.h"
#include "model/forward_scratch.h"

namespace radixserve::model {

void MoeFfn::AddBias(const kernels::KernelTable& kt, const std::vector<float>& bias, int64_t e,
                     int64_t rows, float* y, int64_t n) {
  if (bias.empty()) return;
  for (int64_t r = 0; r < n; ++r) kt.axpy(1.0f, bias.data() + e * rows, y + r * rows, rows);
}

void MoeFfn::SwigluOai(float* gate, const float* up, int64_t n) const {
  const float limit = swiglu_limit_;
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    gate[i] = g / (1.0f + std::exp(-swiglu_alpha_ * g)) * (u + 1.0f);
  }
}

void MoeFfn::Route(const kernels::KernelTable& kt, float* p, float* select, int32_t* choice,
                   float* weight) const {
  const int64_t E = experts_, K = top_k_;
  if (!router_bias_.empty()) kt.axpy(1.0f, router_bias_.data(), p, E);
  if (gating_ == ModelConfig::MoeGating::kSoftmax) kt.softmax(p, E);
  if (gating_ == ModelConfig::MoeGating::kSigmoid) {
    for (int64_t e = 0; e < E; ++e) p[e] = 1.0f / (1.0f + std::exp(-p[e]));
  }
  std::memcpy(select, p, sizeof(float) * static_cast<size_t>(E));
  if (!selection_bias_.empty()) kt.axpy(1.0f, selection_bias_.data(), select, E);
  // Index of the highest of the n scores at x not yet in taken[0, k) (ties: lower index).
  const auto best_of = [](const float* x, int64_t n, const int32_t* taken, int64_t k) {
    int32_t best = -1;
    for (int64_t e = 0; e < n; ++e) {
      if (std::find(taken, taken + k, static_cast<int32_t>(e)) != taken + k) continue;
      if (best < 0 || x[e] > x[best]) best = static_cast<int32_t>(e);
    }
    return best;
  };
  if (groups_ > 1) {
    // Keep the experts of the groups_used_ best groups: the others' scores become -inf.
    const int64_t per = E / groups_;
    float group_score[kMaxGroups];
    int32_t kept[kMaxGroups];
    for (int64_t g = 0; g < groups_; ++g) {
      const float* x = select + g * per;
      int32_t top[2];
      top[0] = best_of(x, per, top, 0);
      group_score[g] = x[top[0]];
      if (group_score_ == ModelConfig::MoeGroupScore::kTopTwoSum) {
        top[1] = best_of(x, per, top, 1);
        group_score[g] += x[top[1]];
      }
    }
    for (int64_t k = 0; k < groups_used_; ++k) kept[k] = best_of(group_score, groups_, kept, k);
    for (int64_t g = 0; g < groups_; ++g) {
      if (std::find(kept, kept + groups_used_, static_cast<int32_t>(g)) != kept + groups_used_) {
        continue;
      }
      std::fill(select + g * per, select + (g + 1) * per, -std::numeric_limits<float>::infinity());
    }
  }
  float sum = 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    choice[k] = best_of(select, E, choice, k);
    weight[k] = p[choice[k]];
    sum += weight[k];
  }
  if (gating_ == ModelConfig::MoeGating::kTopKSoftmax) {
    kt.softmax(weight, K);
  } else if (norm_topk_prob_) {
    // llama.cpp clamps the sum to f16's smallest normal (sigmoid weights may all be tiny).
    sum = std::max(sum, 6.103515625e-5f);
    for (int64_t k = 0; k < K; ++k) weight[k] /= sum;
  }
  if (routed_scale_ != 1.0f) {
    for (int64_t k = 0; k < K; ++k) weight[k] *= routed_scale_;
  }
}

Status MoeFfn::Load(const ModelConfig& c, const std::string& prefix, WeightStore& w,
                    const PackFn& pack, const ColumnsFn& columns) {
  experts_ = c.num_experts;
  top_k_ = c.num_experts_per_tok;
  hidden_ = c.hidden_size;
  inter_ = c.moe_intermediate_size;
  norm_topk_prob_ = c.norm_topk_prob;
  gating_ = c.moe_gating;
  routed_scale_ = static_cast<float>(c.routed_scaling_factor);
  groups_ = c.expert_groups;
  groups_used_ = c.expert_groups_used;
  group_score_ = c.group_score;
  if (groups_ > kMaxGroups) {
    return Unsupported(c.architecture + ": more than " + std::to_string(kMaxGroups) +
                       " expert groups (n_group " + std::to_string(groups_) + ")");
  }
  swiglu_limit_ = static_cast<float>(c.swiglu_limit);
  swiglu_alpha_ = static_cast<float>(c.swiglu_alpha);
  // This rank's experts [e0_, e1_) and rows [row0, row0 + rows) of each (tensor_shard.h).
  const TensorShard& shard = c.tensor_shard;
  if (experts_ % shard.ep_size != 0 || inter_ % shard.moe_tp_size() != 0 ||
      c.shared_expert_intermediate_size % shard.size != 0) {
    return InvalidArgument(
        "argument --ep-size: " + std::to_string(shard.ep_size) + " expert blocks of " +
        std::to_string(shard.moe_tp_size()) + " ranks cannot split the " +
        std::to_string(experts_) + " experts (moe_intermediate_size " + std::to_string(inter_) +
        ", shared " + std::to_string(c.shared_expert_intermediate_size) + ") of " + c.architecture);
  }
  e0_ = shard.ep_rank() * (experts_ / shard.ep_size);
  e1_ = e0_ + experts_ / shard.ep_size;
  const int64_t rows = inter_ / shard.moe_tp_size(), row0 = shard.moe_tp_rank() * rows;
  kernels::WeightMatrix router;
  RADIX_ASSIGN_OR_RETURN(router,
                         w.RequireMatrix(prefix + "ffn_gate_inp.weight", experts_, hidden_));
  router_ = pack(router);
  if (gating_ == ModelConfig::MoeGating::kTopKSoftmax) {
    // A [experts, rows] bias table as floats, one row per expert.
    const auto bias_table = [&](const std::string& name,
                                int64_t rows) -> Expected<std::vector<float>> {
      RADIX_ASSIGN_OR_RETURN(const kernels::WeightMatrix m, w.RequireMatrix(name, experts_, rows));
      std::vector<float> out(static_cast<size_t>(experts_ * rows));
      for (int64_t e = 0; e < experts_; ++e) kernels::DequantizeRow(m, e, out.data() + e * rows);
      return out;
    };
    RADIX_ASSIGN_OR_RETURN(router_bias_, w.RequireVector(prefix + "ffn_gate_inp.bias", experts_));
    RADIX_ASSIGN_OR_RETURN(gate_bias_, bias_table(prefix + "ffn_gate_exps.bias", inter_));
    RADIX_ASSIGN_OR_RETURN(up_bias_, bias_table(prefix + "ffn_up_exps.bias", inter_));
    RADIX_ASSIGN_OR_RETURN(down_bias_, bias_table(prefix + "ffn_down_exps.bias", hidden_));
    // This rank's experts and rows; the down bias is added once per expert (first row shard).
    const auto local = [&](std::vector<float>& table, int64_t rows, int64_t first, int64_t n) {
      std::vector<float> out;
      for (int64_t e = e0_; e < e1_; ++e) {
        const auto at = table.begin() + e * rows + first;
        out.insert(out.end(), at, at + n);
      }
      table = std::move(out);
    };
    local(gate_bias_, inter_, row0, rows);
    local(up_bias_, inter_, row0, rows);
    local(down_bias_, hidden_, 0, hidden_);
    if (shard.moe_tp_rank() != 0) down_bias_.clear();
  }
  if (w.Find(prefix + "exp_probs_b.bias") != nullptr) {
    RADIX_ASSIGN_OR_RETURN(selection_bias_, w.RequireVector(prefix + "exp_probs_b.bias", experts_));
  }
  // Mixtral GGUFs converted before llama.cpp stacked the experts name each expert's matrices
  // blk.N.ffn_gate.E.weight (HF's per-expert tensors are ffn_gate_exps.E.weight here).
  const std::string exps = w.Find(prefix + "ffn_gate_exps.weight") == nullptr &&
                                   w.Find(prefix + "ffn_gate.0.weight") != nullptr
                               ? ""
                               : "_exps";
  std::vector<kernels::WeightMatrix> gate, up, down;
  RADIX_ASSIGN_OR_RETURN(gate,
                         w.RequireExperts(prefix + "ffn_gate" + exps, experts_, inter_, hidden_));
  RADIX_ASSIGN_OR_RETURN(up, w.RequireExperts(prefix + "ffn_up" + exps, experts_, inter_, hidden_));
  RADIX_ASSIGN_OR_RETURN(down,
                         w.RequireExperts(prefix + "ffn_down" + exps, experts_, hidden_, inter_));
  gate_.clear();
  up_.clear();
  down_.clear();
  for (int64_t e = e0_; e < e1_; ++e) {
    const auto ue = static_cast<size_t>(e);
    const std::string name = prefix + "ffn_down" + exps + "." + std::to_string(e);
    RADIX_ASSIGN_OR_RETURN(const kernels::WeightMatrix d, columns(down[ue], row0, rows, name));
    gate_.push_back(pack(gate[ue].Rows(row0, rows)));
    up_.push_back(pack(up[ue].Rows(row0, rows)));
    down_.push_back(pack(d));
  }
  inter_ = rows;
  shared_inter_ = c.shared_expert_intermediate_size;
  if (shared_inter_ == 0) return Status::Ok();
  const std::string gate_name = prefix + "ffn_gate_inp_shexp.weight";
  const WeightTensor* g = w.Find(gate_name);
  if (!c.shared_expert_gated) {
    // DeepSeek: the shared experts' output is added as is.
  } else if (g != nullptr && g->shape.size() == 2) {  // HF: a [1, hidden] linear layer
    kernels::WeightMatrix m;
    RADIX_ASSIGN_OR_RETURN(m, w.RequireMatrix(gate_name, 1, hidden_));
    shared_gate_.resize(static_cast<size_t>(hidden_));
    kernels::DequantizeRow(m, 0, shared_gate_.data());
  } else {
    RADIX_ASSIGN_OR_RETURN(shared_gate_, w.RequireVector(gate_name, hidden_));
  }
  kernels::WeightMatrix sg, su, sd;
  const int64_t S = shared_inter_;
  RADIX_ASSIGN_OR_RETURN(sg, w.RequireMatrix(prefix + "ffn_gate_shexp.weight", S, hidden_));
  RADIX_ASSIGN_OR_RETURN(su, w.RequireMatrix(prefix + "ffn_up_shexp.weight", S, hidden_));
  RADIX_ASSIGN_OR_RETURN(sd, w.RequireMatrix(prefix + "ffn_down_shexp.weight", hidden_, S));
  // The shared experts split over every rank, as a dense MLP under tensor parallelism.
  shared_inter_ = S / shard.size;
  const int64_t s0 = shard.rank * shared_inter_;
  RADIX_ASSIGN_OR_RETURN(sd, columns(sd, s0, shared_inter_, prefix + "ffn_down_shexp.weight"));
  shared_gate_proj_ = pack(sg.Rows(s0, shared_inter_));
  shared_up_ = pack(su.Rows(s0, shared_inter_));
  shared_down_ = pack(sd);
  return Status::Ok();
}

void MoeFfn::Forward(const kernels::KernelTable& kt, ThreadPool* pool, const float* h, int64_t T,
                     kernels::ActivationMode mode, ForwardScratch& s, float* out) const {
  const int64_t E = experts_, K = top_k_, H = hidden_, I = inter_;
  const int64_t S = shared_inter_;
  // Router probabilities, then each token's selection scores, then (with a shared expert) each
  // token's shared-expert scale.
  float* probs = ForwardScratch::Reserve(s.moe_router, 2 * T * E + (S > 0 ? T : 0));
  float* select = probs + T * E;
  kernels::MatMul(kt, pool, h, T, router_, probs, mode);

  // Routing: choice[t * K + k] is token t's k-th expert, weight[t * K + k] its weight.
  s.moe_choice.resize(static_cast<size_t>(T * K));
  float* weight = ForwardScratch::Reserve(s.moe_weight, T * K);
  int32_t* choice = s.moe_choice.data();
  ForRows(pool, T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      Route(kt, probs + t * E, select + t * E, choice + t * K, weight + t * K);
  });

  // Group the (token, k) pairs of this rank's experts by expert, in token order within each:
  // local expert l's rows are [start[l], start[l + 1]) of the grouped buffers; row_of[t * K + k]
  // is the pair's row (-1: another rank's expert).
  const int64_t L = e1_ - e0_;
  const auto local = [&](int64_t i) { return choice[i] >= e0_ && choice[i] < e1_; };
  s.moe_start.assign(static_cast<size_t>(L + 1), 0);
  for (int64_t i = 0; i < T * K; ++i) {
    if (local(i)) ++s.moe_start[static_cast<size_t>(choice[i] - e0_) + 1];
  }
  for (int64_t l = 0; l < L; ++l) s.moe_start[l + 1] += s.moe_start[l];
  s.moe_row_of.resize(static_cast<size_t>(T * K));
  {
    std::vector<int32_t>& next = s.moe_next;
    next.assign(s.moe_start.begin(), s.moe_start.end() - 1);
    for (int64_t i = 0; i < T * K; ++i) s.moe_row_of[i] = local(i) ? next[choice[i] - e0_]++ : -1;
  }
  float* xin = ForwardScratch::Reserve(s.moe_in, T * K * H);
  float* gate = ForwardScratch::Reserve(s.moe_gate, T * std::max(K * I, S));
  float* up = ForwardScratch::Reserve(s.moe_up, T * std::max(K * I, S));
  float* y = ForwardScratch::Reserve(s.moe_out, T * K * H);
  ForRows(pool, T * K, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (s.moe_row_of[i] >= 0) {
        std::memcpy(xin + s.moe_row_of[i] * H, h + (i / K) * H, sizeof(float) * H);
      }
    }
  });
  for (int64_t e = 0; e < L; ++e) {
    const int64_t r0 = s.moe_start[e], n = s.moe_start[e + 1] - r0;
    if (n == 0) continue;
    const auto ue = static_cast<size_t>(e);
    kernels::MatMul(kt, pool, xin + r0 * H, n, gate_[ue], gate + r0 * I, mode);
    kernels::MatMul(kt, pool, xin + r0 * H, n, up_[ue], up + r0 * I, mode);
    AddBias(kt, gate_bias_, e, I, gate + r0 * I, n);
    AddBias(kt, up_bias_, e, I, up + r0 * I, n);
    ForRows(pool, n, [&](int64_t begin, int64_t end) {
      for (int64_t r = r0 + begin; r < r0 + end; ++r) {
        if (swiglu_limit_ > 0) {
          SwigluOai(gate + r * I, up + r * I, I);
        } else {
          kt.silu_mul(gate + r * I, up + r * I, gate + r * I, I);
        }
      }
    });
    kernels::MatMul(kt, pool, gate + r0 * I, n, down_[ue], y + r0 * H, mode);
    AddBias(kt, down_bias_, e, H, y + r0 * H, n);
  }
  // The shared expert over all tokens, into the (now free) grouped input buffer, with each
  // token's sigmoid gate (computed before `out`, which may alias h, is written).
  float* shared = nullptr;
  float* shared_scale = nullptr;
  if (S > 0) {
    float* sg = gate;
    float* su = up;
    shared = xin;
    shared_scale = probs + 2 * T * E;
    kernels::MatMul(kt, pool, h, T, shared_gate_proj_, sg, mode);
    kernels::MatMul(kt, pool, h, T, shared_up_, su, mode);
    ForRows(pool, T, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        kt.silu_mul(sg + t * S, su + t * S, sg + t * S, S);
        shared_scale[t] =
            shared_gate_.empty()
                ? 1.0f
                : 1.0f / (1.0f + std::exp(-kt.dot(h + t * H, shared_gate_.data(), H)));
      }
    });
    kernels::MatMul(kt, pool, sg, T, shared_down_, shared, mode);
  }
  // Each token's weighted sum over its (local) experts, in its own top-k order (then the shared
  // expert).
  ForRows(pool, T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* ot = out + t * H;
      std::fill(ot, ot + H, 0.0f);
      for (int64_t k = 0; k < K; ++k) {
        const int32_t row = s.moe_row_of[t * K + k];
        if (row >= 0) kt.axpy(weight[t * K + k], y + row * H, ot, H);
      }
      if (shared != nullptr) kt.axpy(shared_scale[t], shared + t * H, ot, H);
    }
  });
}

}  // namespace radixserve::model

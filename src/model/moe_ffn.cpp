#include "model/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "common/check.h"
#include "common/log.h"
#include "model/for_rows.h"
#include "model/forward_scratch.h"
#include "model/fused_weights.h"

namespace radixserve::model {

void MoeFfn::AddBias(const kernels::KernelTable& kt, const std::vector<float>& bias, int64_t e,
                     int64_t rows, float* y, int64_t n) {
  if (bias.empty()) return;
  for (int64_t r = 0; r < n; ++r) kt.axpy(1.0f, bias.data() + e * rows, y + r * rows, rows);
}

void MoeFfn::AddGateUpLora(const kernels::KernelTable& kt, const ExpertLora& lora, const float* x,
                           float* gate, float* up) {
  if (lora.gate_up) {  // one shrink for both halves (gate rows first)
    const LoraWeights& w = *lora.gate_up;
    const int64_t half = w.out / 2;
    for (int64_t k = 0; k < w.rank; ++k) {
      const float mid = w.Shrink(kt, k, x);
      w.ExpandRange(kt, k, mid, 0, half, gate);
      w.ExpandRange(kt, k, mid, half, half, up);
    }
  }
  if (lora.gate) lora.gate->Add(kt, x, gate);
  if (lora.up) lora.up->Add(kt, x, up);
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
                   float* weight, bool use_selection_bias) const {
  const int64_t E = experts_, K = top_k_;
  if (!router_bias_.empty()) kt.axpy(1.0f, router_bias_.data(), p, E);
  if (gating_ == ModelConfig::MoeGating::kSoftmax) kt.softmax(p, E);
  if (gating_ == ModelConfig::MoeGating::kSigmoid) {
    for (int64_t e = 0; e < E; ++e) p[e] = 1.0f / (1.0f + std::exp(-p[e]));
  }
  std::memcpy(select, p, sizeof(float) * static_cast<size_t>(E));
  if (use_selection_bias && !selection_bias_.empty()) {
    kt.axpy(1.0f, selection_bias_.data(), select, E);
  }
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

Status MoeFfn::Load(const ModelConfig& c, int64_t layer, WeightStore& w, const PackFn& pack,
                    PackFn repack, const ColumnsFn& columns) {
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
  layer_ = layer;
  prefix_ = "blk." + std::to_string(layer) + ".";
  const std::string& prefix = prefix_;
  options_ = c.expert_placement;
  repack_ = std::move(repack);
  if (groups_ > kMaxGroups) {
    return Unsupported(c.architecture + ": more than " + std::to_string(kMaxGroups) +
                       " expert groups (n_group " + std::to_string(groups_) + ")");
  }
  swiglu_limit_ = static_cast<float>(c.swiglu_limit);
  swiglu_alpha_ = static_cast<float>(c.swiglu_alpha);
  // This rank's slots and rows [row0_, row0_ + rows) of each expert (tensor_shard.h).
  const TensorShard& shard = c.tensor_shard;
  const int64_t physical = experts_ + options_.redundant_experts;
  if (physical % shard.ep_size != 0) {
    return InvalidArgument("argument --ep-num-redundant-experts: " + std::to_string(experts_) +
                           " experts of " + c.architecture + " + " +
                           std::to_string(options_.redundant_experts) +
                           " redundant replicas do not divide into --ep-size " +
                           std::to_string(shard.ep_size) + " blocks");
  }
  if (inter_ % shard.moe_tp_size() != 0 || c.shared_expert_intermediate_size % shard.size != 0) {
    return InvalidArgument("argument --ep-size: " + std::to_string(shard.ep_size) +
                           " expert blocks of " + std::to_string(shard.moe_tp_size()) +
                           " ranks cannot split the experts of " + c.architecture +
                           " (moe_intermediate_size " + std::to_string(inter_) + ", shared " +
                           std::to_string(c.shared_expert_intermediate_size) + ")");
  }
  // The initial placement (expert_placement.h); the options keep no copy of the tables.
  const std::string where = "argument --init-expert-location: layer " + std::to_string(layer);
  const size_t given = std::max(options_.initial_map.size(), options_.initial_load.size());
  if (given != 0 && static_cast<int64_t>(given) != c.num_layers) {
    return InvalidArgument("argument --init-expert-location: " + std::to_string(given) +
                           " layers, but " + c.architecture + " has " +
                           std::to_string(c.num_layers));
  }
  const auto row = static_cast<size_t>(layer);
  if (!options_.initial_map.empty()) {
    RADIX_ASSIGN_OR_RETURN(placement_, ExpertPlacement::FromMap(options_.initial_map[row], experts_,
                                                                physical, shard.ep_size, where));
  } else if (!options_.initial_load.empty()) {
    const std::vector<double>& load = options_.initial_load[row];
    if (static_cast<int64_t>(load.size()) != experts_) {
      return InvalidArgument(where + ": " + std::to_string(load.size()) + " expert counts, but " +
                             c.architecture + " has " + std::to_string(experts_) + " experts");
    }
    placement_ = ExpertPlacement::Balanced(load, physical, shard.ep_size);
  } else {
    placement_ = ExpertPlacement::Trivial(experts_, physical, shard.ep_size);
  }
  options_.initial_map.clear();
  options_.initial_load.clear();
  slot0_ = shard.ep_rank() * placement_.slots_per_block();
  moe_tp_size_ = shard.moe_tp_size();
  const int64_t rows = inter_ / moe_tp_size_;
  row0_ = shard.moe_tp_rank() * rows;
  if (options_.rebalance) {
    window_ = Window{};
    window_.load.assign(static_cast<size_t>(experts_), 0.0);
    const int64_t stagger =
        options_.layers_per_chunk > 0
            ? std::max<int64_t>(0, layer - c.first_dense_layers) / options_.layers_per_chunk
            : 0;
    window_.due = options_.rebalance_every + stagger;
  }
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
    // This rank's rows of every expert; the down bias is added once per expert (first row shard).
    const auto local = [&](std::vector<float>& table) {
      std::vector<float> out;
      for (int64_t e = 0; e < experts_; ++e) {
        const auto at = table.begin() + e * inter_ + row0_;
        out.insert(out.end(), at, at + rows);
      }
      table = std::move(out);
    };
    local(gate_bias_);
    local(up_bias_);
    if (shard.moe_tp_rank() != 0) down_bias_.clear();
  }
  if (w.Find(prefix + "exp_probs_b.bias") != nullptr) {
    RADIX_ASSIGN_OR_RETURN(selection_bias_, w.RequireVector(prefix + "exp_probs_b.bias", experts_));
  }
  // Mixtral GGUFs converted before llama.cpp stacked the experts name each expert's matrices
  // blk.N.ffn_gate.E.weight (HF's per-expert tensors are ffn_gate_exps.E.weight here).
  exps_ = w.Find(prefix + "ffn_gate_exps.weight") == nullptr &&
                  w.Find(prefix + "ffn_gate.0.weight") != nullptr
              ? ""
              : "_exps";
  RADIX_ASSIGN_OR_RETURN(gate_src_,
                         w.RequireExperts(prefix + "ffn_gate" + exps_, experts_, inter_, hidden_));
  RADIX_ASSIGN_OR_RETURN(up_src_,
                         w.RequireExperts(prefix + "ffn_up" + exps_, experts_, inter_, hidden_));
  RADIX_ASSIGN_OR_RETURN(down_src_,
                         w.RequireExperts(prefix + "ffn_down" + exps_, experts_, hidden_, inter_));
  inter_ = rows;
  slots_.assign(static_cast<size_t>(placement_.slots_per_block()), Slot{});
  for (size_t i = 0; i < slots_.size(); ++i) {
    const int32_t expert = placement_.physical_to_logical()[static_cast<size_t>(slot0_) + i];
    RADIX_RETURN_IF_ERROR(FillSlot(i, expert, pack));
  }
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

Status MoeFfn::FillSlot(size_t slot, int32_t expert, const PackFn& pack) const {
  const auto e = static_cast<size_t>(expert);
  Slot& to = slots_[slot];
  to.expert = expert;
  to.gate = pack(gate_src_[e].Rows(row0_, inter_));
  to.up = pack(up_src_[e].Rows(row0_, inter_));
  if (moe_tp_size_ == 1) {
    to.down_columns.clear();
    to.down = pack(down_src_[e]);
    return Status::Ok();
  }
  const auto down = FusedWeights::CopyColumns(down_src_[e], row0_, inter_, to.down_columns);
  if (!down) {
    return ColumnShardError(down_src_[e], inter_,
                            prefix_ + "ffn_down" + exps_ + "." + std::to_string(expert),
                            static_cast<int>(moe_tp_size_));
  }
  to.down = pack(*down);
  return Status::Ok();
}

void MoeFfn::CountPass(const int32_t* choice, const int32_t* slot, int64_t pairs) const {
  std::vector<double> block_load(static_cast<size_t>(placement_.blocks()), 0.0);
  for (int64_t i = 0; i < pairs; ++i) {
    window_.load[static_cast<size_t>(choice[i])] += 1.0;
    block_load[static_cast<size_t>(placement_.BlockOf(slot[i]))] += 1.0;
  }
  window_.balancedness += BlockBalancedness(block_load);
  ++window_.length;
}

void MoeFfn::Rebalance() const {
  const int64_t pass = window_.passes - 1;  // (this pass's number, counting from 0)
  window_.due += options_.rebalance_every;
  const double utilization =
      window_.length > 0 ? window_.balancedness / static_cast<double>(window_.length) : 1.0;
  std::vector<double> load(static_cast<size_t>(experts_), 0.0);
  std::swap(load, window_.load);
  window_.balancedness = 0;
  window_.length = 0;
  if (utilization > options_.min_utilization) {
    RADIX_LOG_INFO(
        "[EPLB] layer {} pass {}: balancedness {:.3f} over the window is above "
        "--eplb-min-rebalancing-utilization-threshold {:.3f}; placement kept",
        layer_, pass, utilization, options_.min_utilization);
    return;
  }
  ExpertPlacement next =
      ExpertPlacement::Balanced(load, placement_.num_physical(), placement_.blocks())
          .KeepingSlotsOf(placement_);
  int moved = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const int32_t expert = next.physical_to_logical()[static_cast<size_t>(slot0_) + i];
    if (expert == slots_[i].expert) continue;
    // The store's matrices were validated at load, so a slot refills as it first filled.
    const Status filled = FillSlot(i, expert, repack_);
    RADIX_CHECK_MSG(filled.ok(), filled.message().c_str());
    ++moved;
  }
  RADIX_LOG_INFO(
      "[EPLB] layer {} pass {}: rebalanced from {:.0f} expert choices; balancedness over the "
      "window {:.3f}, expected now {:.3f} (was {:.3f}); {} of this rank's {} slots reloaded",
      layer_, pass, std::accumulate(load.begin(), load.end(), 0.0), utilization,
      next.Balancedness(load), placement_.Balancedness(load), moved, slots_.size());
  placement_ = std::move(next);
}

void MoeFfn::Forward(const kernels::KernelTable& kt, ThreadPool* pool, const float* h, int64_t T,
                     kernels::ActivationMode mode, ForwardScratch& s, float* out,
                     const LoraRows* lora) const {
  const int64_t E = experts_, K = top_k_, H = hidden_, I = inter_;
  const int64_t S = shared_inter_;
  // The pass counter moves only when something reads it (static dispatch without rebalancing
  // leaves the layer untouched, so engine replicas may share it: --dp-size).
  const bool counting = options_.rebalance || options_.dispatch != ExpertDispatch::kStatic;
  const int64_t pass = counting ? window_.passes++ : 0;
  if (options_.rebalance && pass >= window_.due) Rebalance();
  // Router probabilities, then each token's selection scores, then (with a shared expert) each
  // token's shared-expert scale.
  float* probs = ForwardScratch::Reserve(s.moe_router, 2 * T * E + (S > 0 ? T : 0));
  float* select = probs + T * E;
  kernels::MatMul(kt, pool, h, T, router_, probs, mode);
  const bool fake = options_.dispatch == ExpertDispatch::kFake;
  if (fake) {  // SGLang's load test: router logits uniform in [5, 10)
    for (int64_t i = 0; i < T * E; ++i) {
      const uint64_t draw =
          MixBits(MixBits(static_cast<uint64_t>(layer_) << 40 ^ static_cast<uint64_t>(pass) << 20) +
                  static_cast<uint64_t>(i));
      probs[i] = 5.0f + 5.0f * static_cast<float>(draw >> 40) / static_cast<float>(1 << 24);
    }
  }

  // Routing: choice[t * K + k] is token t's k-th expert, weight[t * K + k] its weight, and
  // slot[t * K + k] the physical slot computing it.
  s.moe_choice.resize(static_cast<size_t>(T * K));
  s.moe_slot.resize(static_cast<size_t>(T * K));
  float* weight = ForwardScratch::Reserve(s.moe_weight, T * K);
  int32_t* choice = s.moe_choice.data();
  int32_t* slot = s.moe_slot.data();
  const ExpertDispatch dispatch = fake ? ExpertDispatch::kDynamic : options_.dispatch;
  ForRows(pool, T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      Route(kt, probs + t * E, select + t * E, choice + t * K, weight + t * K, !fake);
      for (int64_t k = 0; k < K; ++k) {
        const int32_t e = choice[t * K + k];
        slot[t * K + k] =
            placement_.Dispatch(dispatch, e, t, k, pass, static_cast<uint64_t>(layer_));
      }
    }
  });
  if (options_.rebalance) CountPass(choice, slot, T * K);

  // Group the (token, k) pairs of this rank's slots by slot, in token order within each: local
  // slot l's rows are [start[l], start[l + 1]) of the grouped buffers; row_of[t * K + k] is the
  // pair's row (-1: another rank's slot).
  const auto L = static_cast<int64_t>(slots_.size());
  const auto local = [&](int64_t i) { return slot[i] >= slot0_ && slot[i] < slot0_ + L; };
  s.moe_start.assign(static_cast<size_t>(L + 1), 0);
  for (int64_t i = 0; i < T * K; ++i) {
    if (local(i)) ++s.moe_start[static_cast<size_t>(slot[i] - slot0_) + 1];
  }
  for (int64_t l = 0; l < L; ++l) s.moe_start[l + 1] += s.moe_start[l];
  s.moe_row_of.resize(static_cast<size_t>(T * K));
  {
    std::vector<int32_t>& next = s.moe_next;
    next.assign(s.moe_start.begin(), s.moe_start.end() - 1);
    for (int64_t i = 0; i < T * K; ++i) s.moe_row_of[i] = local(i) ? next[slot[i] - slot0_]++ : -1;
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
  // Every active slot's gate and up projections, then their down projections, each as one group
  // (kernels::GroupedMatMul: at decode one parallel pass over all the slots' matrices).
  std::vector<kernels::MatMulJob>& jobs = s.moe_jobs;
  const auto each_slot = [&](const auto& fn) {
    for (int64_t l = 0; l < L; ++l) {
      const int64_t r0 = s.moe_start[l], n = s.moe_start[l + 1] - r0;
      if (n > 0) fn(slots_[static_cast<size_t>(l)], r0, n);
    }
  };
  jobs.clear();
  each_slot([&](const Slot& at, int64_t r0, int64_t n) {
    jobs.push_back({xin + r0 * H, n, &at.gate, gate + r0 * I});
    jobs.push_back({xin + r0 * H, n, &at.up, up + r0 * I});
  });
  kernels::GroupedMatMul(kt, pool, jobs, mode);
  // LoRA: each adapted token's updates of its own (local) experts' rows, all on one thread, so
  // they do not depend on the batch; `each_adapted_pair` runs fn(adapter's expert, token, row).
  const bool adapted = lora != nullptr && lora->size() > 0;
  const auto each_adapted_pair = [&](const auto& fn) {
    ForEachLoraRow(pool, *lora, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t t = lora->rows[static_cast<size_t>(i)];
        for (int64_t k = 0; k < K; ++k) {
          const int32_t row = s.moe_row_of[t * K + k];
          if (row < 0) continue;
          const ExpertLora* e =
              lora->adapters[static_cast<size_t>(i)]->FindExpert(layer_, choice[t * K + k]);
          if (e != nullptr) fn(*e, t, static_cast<int64_t>(row));
        }
      }
    });
  };
  if (adapted) {
    each_adapted_pair([&](const ExpertLora& e, int64_t t, int64_t row) {
      AddGateUpLora(kt, e, h + t * H, gate + row * I, up + row * I);
    });
  }
  each_slot([&](const Slot& at, int64_t r0, int64_t n) {
    AddBias(kt, gate_bias_, at.expert, I, gate + r0 * I, n);
    AddBias(kt, up_bias_, at.expert, I, up + r0 * I, n);
  });
  ForRows(pool, s.moe_start[L], [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      if (swiglu_limit_ > 0) {
        SwigluOai(gate + r * I, up + r * I, I);
      } else {
        kt.silu_mul(gate + r * I, up + r * I, gate + r * I, I);
      }
    }
  });
  jobs.clear();
  each_slot([&](const Slot& at, int64_t r0, int64_t n) {
    jobs.push_back({gate + r0 * I, n, &at.down, y + r0 * H});
  });
  kernels::GroupedMatMul(kt, pool, jobs, mode);
  if (adapted) {
    each_adapted_pair([&](const ExpertLora& e, int64_t, int64_t row) {
      if (e.down) e.down->Add(kt, gate + row * I, y + row * H);
    });
  }
  each_slot([&](const Slot& at, int64_t r0, int64_t n) {
    AddBias(kt, down_bias_, at.expert, H, y + r0 * H, n);
  });
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
    // LoRA on the shared experts: each adapted token's rows on one thread.
    const auto each_shared_row = [&](const auto& fn) {
      ForEachLoraRow(pool, *lora, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const ExpertLora* e = lora->adapters[static_cast<size_t>(i)]->FindShared(layer_);
          if (e != nullptr) fn(*e, lora->rows[static_cast<size_t>(i)]);
        }
      });
    };
    if (adapted) {
      each_shared_row([&](const ExpertLora& e, int64_t t) {
        AddGateUpLora(kt, e, h + t * H, sg + t * S, su + t * S);
      });
    }
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
    if (adapted) {
      each_shared_row([&](const ExpertLora& e, int64_t t) {
        if (e.down) e.down->Add(kt, sg + t * S, shared + t * H);
      });
    }
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

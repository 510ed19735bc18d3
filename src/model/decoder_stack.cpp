#include "model/decoder_stack.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <tuple>

#include "common/check.h"
#include "common/log.h"
#include "common/machine.h"
#include "common/status.h"
#include "kernels/gelu_f16_table.h"
#include "model/for_rows.h"
#include "model/forward_scratch.h"
#include "model/paged_attention.h"

namespace radixserve::model {
namespace {}  // namespace

// Everything one Forward shares between its layers.
struct DecoderStack::Step {
  const kernels::KernelTable* kt;
  ThreadPool* pool;
  const ForwardBatch* batch;
  const BatchLayout* layout;
  ForwardScratch* s;
  int64_t tokens;
  const float* rope_cos[2];  // [0] global, [1] sliding-window layers
  const float* rope_sin[2];
  bool lora = false;  // some sequence has an adapter (groups in s->lora_groups)
};

Status DecoderStack::Load(const ModelConfig& c, DecoderSpec spec, WeightStore& w) {
  config_ = c;
  spec_ = std::move(spec);
  activation_mode_ = w.activation_mode();
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t q_dim = c.num_heads * D, kv_dim = c.num_kv_heads * D;
  const TensorShard& shard = c.tensor_shard;
  if (shard.sharded()) {
    RADIX_RETURN_IF_ERROR(CheckShardable(c, spec_));
    config_.num_heads /= shard.size;
    config_.intermediate_size /= shard.size;
    spec_.attention.num_heads /= shard.size;
    if (!spec_.mla) {  // MLA's one compressed KV row stays whole on every rank
      config_.num_kv_heads /= shard.size;
      spec_.attention.num_kv_heads /= shard.size;
    }
  } else if (shard.ep_size > 1 && !spec_.moe) {
    RADIX_LOG_WARN("--ep-size {} has no effect: {} has no experts", shard.ep_size, c.architecture);
  }
  if (!spec_.moe && (c.expert_placement.redundant_experts > 0 || c.expert_placement.rebalance)) {
    RADIX_LOG_WARN("--ep-num-redundant-experts and --enable-eplb have no effect: {} has no experts",
                   c.architecture);
  }
  const auto columns = [this](const kernels::WeightMatrix& m, int64_t first, int64_t n,
                              const std::string& name) { return ShardColumns(m, first, n, name); };
  const PipelineStage& stage = c.pipeline_stage;
  int64_t first_layer = 0, end_layer = c.num_layers;
  if (stage.split()) {
    RADIX_RETURN_IF_ERROR(CheckStageable(c));
    std::tie(first_layer, end_layer) = StageLayers(c.num_layers, stage.rank, stage.size);
    config_.num_layers = end_layer - first_layer;
    config_.pipeline_first_layer = first_layer;
  }
  RADIX_ASSIGN_OR_RETURN(embedding_, w.RequireMatrix("token_embd.weight", c.vocab_size, H));
  RADIX_ASSIGN_OR_RETURN(output_norm_, w.RequireVector("output_norm.weight", H));
  // Repacking pays only on the integer path (kGgmlRounded). A packed matrix's panels replace its
  // source pages (dropped below), and panels can take twice the bytes of a 4-bit matrix, so a
  // matrix is packed only while the weights' footprint, were it the last one packed (the panels
  // so far and its own, plus every source not packed), stays within three quarters of the memory
  // available when loading starts: the matrices past that run from their source (slower, not
  // wrong). A 16-bit or 8-bit checkpoint, whose panels are the size of its matrices, is packed
  // whole when it fits in that share at all.
  const uint64_t available = ProbeMachine().available_memory_bytes;
  const int64_t pack_budget = available == 0 ? std::numeric_limits<int64_t>::max()
                                             : static_cast<int64_t>(available / 4 * 3);
  const int64_t stored_total = w.stored_bytes();
  int64_t packed_total = 0, packed_sources = 0;
  bool over_budget = false;
  // Panels for the active kernels on the integer path; otherwise the matrix as it is. A packed
  // matrix's source pages leave this process's resident set (the panels serve every matmul;
  // what still reads the source, an embedding row or a repack, faults its pages back in).
  const MoeFfn::PackFn pack_always = [mode = activation_mode_,
                                      store = &w](const kernels::WeightMatrix& m) {
    if (mode != kernels::ActivationMode::kGgmlRounded) {
      return kernels::PackedWeight{.source = m, .variant = "", .panels = {}};
    }
    kernels::PackedWeight packed = kernels::Pack(kernels::ActiveKernels(), nullptr, m);
    if (packed.packed()) store->DropSourcePages(m);
    return packed;
  };
  auto pack = [&](const kernels::WeightMatrix& m) {
    const kernels::PackedWeight unpacked{.source = m, .variant = "", .panels = {}};
    if (activation_mode_ != kernels::ActivationMode::kGgmlRounded) return unpacked;
    const kernels::KernelTable& table = kernels::ActiveKernels();
    const int64_t bytes = kernels::PackedBytes(table, m);
    const int64_t source = m.rows * m.row_bytes();
    const int64_t unpacked_rest = std::max<int64_t>(0, stored_total - packed_sources - source);
    if (bytes > 0 && packed_total + bytes + unpacked_rest > pack_budget) {
      if (!over_budget) {
        RADIX_LOG_WARN(
            "Weight panels ({:.1f} GB so far) and the unpacked matrices would exceed three "
            "quarters of the available memory ({:.1f} GB); the remaining matrices stay unpacked "
            "(slower matrix multiplications)",
            static_cast<double>(packed_total) / 1e9, static_cast<double>(available) / 1e9);
      }
      over_budget = true;
      return unpacked;
    }
    packed_total += bytes;
    packed_sources += source;
    return pack_always(m);
  };
  // A copy FusedWeights made (stacked Q/K/V or gate/up rows, a tensor-parallel column shard),
  // packed: the panels replace both the copy, which is freed, and the source pages of `parts`.
  // The packed matrix keeps its shape with no source bytes (nothing multiplies it unpacked).
  auto pack_copy = [&](const kernels::WeightMatrix& copy,
                       std::initializer_list<kernels::WeightMatrix> parts) {
    kernels::PackedWeight packed = pack(copy);
    if (!packed.packed()) return packed;
    for (const kernels::WeightMatrix& part : parts) w.DropSourcePages(part);
    if (fused_.Release(copy)) packed.source.data = nullptr;
    return packed;
  };
  if (c.hidden_states_only || shard.rank > 0 || stage.rank > 0) {
    // No LM head: an embedder or a classifier reads the final hidden states (ForwardHidden);
    // tensor-parallel ranks other than 0 and pipeline stages other than 0 compute no logits.
  } else if (spec_.tie_word_embeddings && w.Find("output.weight") == nullptr) {
    lm_head_ = pack(embedding_);
  } else {
    kernels::WeightMatrix output;
    RADIX_ASSIGN_OR_RETURN(output, w.RequireMatrix("output.weight", c.vocab_size, H));
    lm_head_ = pack(output);
  }
  // Layer l's tensors (blk.l.*), its experts shaped by `lc`.
  const auto load_layer = [&](int64_t l, const ModelConfig& lc, Layer& layer) -> Status {
    layer.index = l;
    const std::string p = "blk." + std::to_string(l) + ".";
    if (spec_.sliding_window_layers && l < c.num_layers) {
      RADIX_CHECK(static_cast<int64_t>(c.layer_is_sliding.size()) == c.num_layers);
      layer.sliding = c.layer_is_sliding[static_cast<size_t>(l)];
      layer.sliding_window = layer.sliding ? c.sliding_window : 0;
    }
    if (!c.layer_uses_rope.empty() && l < c.num_layers) {
      layer.rope = c.layer_uses_rope[static_cast<size_t>(l)];
    }
    if (spec_.pre_norms) {
      RADIX_ASSIGN_OR_RETURN(layer.attn_norm, w.RequireVector(p + "attn_norm.weight", H));
      RADIX_ASSIGN_OR_RETURN(layer.ffn_norm,
                             w.RequireVector(p + spec_.ffn_norm_tensor + ".weight", H));
    }
    if (spec_.sandwich_norms) {
      RADIX_ASSIGN_OR_RETURN(layer.post_attn_norm,
                             w.RequireVector(p + "post_attention_norm.weight", H));
      RADIX_ASSIGN_OR_RETURN(layer.post_ffn_norm, w.RequireVector(p + "post_ffw_norm.weight", H));
    }
    if (spec_.qk_norm) {
      const bool full = spec_.qk_norm_full;
      RADIX_ASSIGN_OR_RETURN(layer.q_norm,
                             w.RequireVector(p + "attn_q_norm.weight", full ? q_dim : D));
      RADIX_ASSIGN_OR_RETURN(layer.k_norm,
                             w.RequireVector(p + "attn_k_norm.weight", full ? kv_dim : D));
    }
    kernels::WeightMatrix q, k, v, o, gate, up, down;
    const bool sparse = spec_.moe && l >= c.first_dense_layers;
    if (spec_.mla) {
      RADIX_RETURN_IF_ERROR(
          layer.mla.emplace().Load(c, p, w, pack, columns, spec_.attention, spec_.rope_layout));
    } else if (w.Find(p + "attn_qkv.weight") != nullptr) {
      // A checkpoint that stores Q, K and V stacked (Phi-3's qkv_proj).
      kernels::WeightMatrix qkv;
      RADIX_ASSIGN_OR_RETURN(qkv, w.RequireMatrix(p + "attn_qkv.weight", q_dim + 2 * kv_dim, H));
      q = qkv.Rows(0, q_dim);
      k = qkv.Rows(q_dim, kv_dim);
      v = qkv.Rows(q_dim + kv_dim, kv_dim);
    } else {
      RADIX_ASSIGN_OR_RETURN(q, w.RequireMatrix(p + "attn_q.weight", q_dim, H));
      RADIX_ASSIGN_OR_RETURN(k, w.RequireMatrix(p + "attn_k.weight", kv_dim, H));
      RADIX_ASSIGN_OR_RETURN(v, w.RequireMatrix(p + "attn_v.weight", kv_dim, H));
    }
    if (!spec_.mla) {
      RADIX_ASSIGN_OR_RETURN(o, w.RequireMatrix(p + "attn_output.weight", H, q_dim));
    }
    if (sparse) {
      RADIX_RETURN_IF_ERROR(layer.moe.emplace().Load(lc, l, w, pack, pack_always, columns));
    } else if (spec_.gate_up_in_up) {
      kernels::WeightMatrix gate_up;
      RADIX_ASSIGN_OR_RETURN(gate_up, w.RequireMatrix(p + "ffn_up.weight", 2 * I, H));
      gate = gate_up.Rows(0, I);
      up = gate_up.Rows(I, I);
      RADIX_ASSIGN_OR_RETURN(down, w.RequireMatrix(p + "ffn_down.weight", H, I));
    } else {
      RADIX_ASSIGN_OR_RETURN(gate, w.RequireMatrix(p + "ffn_gate.weight", I, H));
      RADIX_ASSIGN_OR_RETURN(up, w.RequireMatrix(p + "ffn_up.weight", I, H));
      RADIX_ASSIGN_OR_RETURN(down, w.RequireMatrix(p + "ffn_down.weight", H, I));
    }
    if (spec_.qkv_bias) {
      std::vector<float> qb, kb, vb;
      RADIX_ASSIGN_OR_RETURN(qb, w.RequireVector(p + "attn_q.bias", q_dim));
      RADIX_ASSIGN_OR_RETURN(kb, w.RequireVector(p + "attn_k.bias", kv_dim));
      RADIX_ASSIGN_OR_RETURN(vb, w.RequireVector(p + "attn_v.bias", kv_dim));
      layer.qkv_bias = std::move(qb);
      layer.qkv_bias.insert(layer.qkv_bias.end(), kb.begin(), kb.end());
      layer.qkv_bias.insert(layer.qkv_bias.end(), vb.begin(), vb.end());
    }
    if (spec_.output_bias) {
      RADIX_ASSIGN_OR_RETURN(layer.o_bias, w.RequireVector(p + "attn_output.bias", H));
    }
    if (spec_.attention_sinks) {
      RADIX_ASSIGN_OR_RETURN(layer.sinks, w.RequireVector(p + "attn_sinks.weight", c.num_heads));
    }
    if (shard.sharded()) {
      // This rank's heads and MLP rows (tensor_shard.h); the output and down projections keep
      // the matching columns, so their products are partial sums the group adds up.
      const int64_t lq = config_.num_heads * D, lkv = config_.num_kv_heads * D;
      const int64_t li = config_.intermediate_size, r = shard.rank;
      if (!spec_.mla) {  // (MlaAttention keeps its own heads)
        q = q.Rows(r * lq, lq);
        k = k.Rows(r * lkv, lkv);
        v = v.Rows(r * lkv, lkv);
        RADIX_ASSIGN_OR_RETURN(o, ShardColumns(o, r * lq, lq, p + "attn_output.weight"));
      }
      if (!sparse) {  // (MoeFfn keeps its own experts and rows)
        gate = gate.Rows(r * li, li);
        up = up.Rows(r * li, li);
        RADIX_ASSIGN_OR_RETURN(down, ShardColumns(down, r * li, li, p + "ffn_down.weight"));
      }
      if (!layer.sinks.empty()) {
        const int64_t heads = config_.num_heads;
        layer.sinks = std::vector<float>(layer.sinks.begin() + r * heads,
                                         layer.sinks.begin() + (r + 1) * heads);
      }
      if (spec_.qkv_bias) {
        const std::vector<float>& b = layer.qkv_bias;
        std::vector<float> local(b.begin() + r * lq, b.begin() + (r + 1) * lq);
        local.insert(local.end(), b.begin() + q_dim + r * lkv, b.begin() + q_dim + (r + 1) * lkv);
        local.insert(local.end(), b.begin() + q_dim + kv_dim + r * lkv,
                     b.begin() + q_dim + kv_dim + (r + 1) * lkv);
        layer.qkv_bias = std::move(local);
      }
    }
    if (spec_.mla) {
      // MlaAttention holds the attention's weights.
    } else if (auto qkv = fused_.Stack({q, k, v})) {
      layer.q = pack_copy(*qkv, {q, k, v});
      layer.qkv_fused = true;
    } else {
      layer.q = pack(q);
      layer.k = pack(k);
      layer.v = pack(v);
    }
    if (!spec_.mla) layer.o = pack_copy(o, {});
    if (sparse) return Status::Ok();
    if (auto gate_up = fused_.Stack({gate, up})) {
      layer.gate = pack_copy(*gate_up, {gate, up});
      layer.gate_up_fused = true;
    } else {
      layer.gate = pack(gate);
      layer.up = pack(up);
    }
    layer.down = pack_copy(down, {});
    return Status::Ok();
  };
  layers_.assign(static_cast<size_t>(end_layer - first_layer), Layer{});
  for (int64_t l = first_layer; l < end_layer; ++l) {
    RADIX_RETURN_IF_ERROR(load_layer(l, c, layers_[static_cast<size_t>(l - first_layer)]));
  }
  if (!c.load_mtp) return Status::Ok();
  // The first multi-token-prediction block: blk.L.* after the L main layers, plus its nextn.*
  // tensors; its own embedding, head norm and head when the checkpoint has them, else the
  // model's (as llama.cpp reads them).
  if (shard.sharded() || stage.split() || c.hidden_states_only) {
    return InvalidArgument(
        "argument --speculative-algorithm: the NEXTN draft (multi-token prediction) runs with "
        "--tp-size 1 and --pp-size 1 only");
  }
  ModelConfig mtp_config = c;
  mtp_config.expert_placement = ExpertPlacementOptions{};  // placement tables cover main layers
  mtp_ = Mtp{};
  Mtp& mtp = *mtp_;
  RADIX_RETURN_IF_ERROR(load_layer(c.num_layers, mtp_config, mtp.layer));
  const std::string p = "blk." + std::to_string(c.num_layers) + ".nextn.";
  RADIX_ASSIGN_OR_RETURN(mtp.enorm, w.RequireVector(p + "enorm.weight", H));
  RADIX_ASSIGN_OR_RETURN(mtp.hnorm, w.RequireVector(p + "hnorm.weight", H));
  if (w.Find(p + "shared_head_norm.weight") != nullptr) {
    RADIX_ASSIGN_OR_RETURN(mtp.head_norm, w.RequireVector(p + "shared_head_norm.weight", H));
  } else {
    mtp.head_norm = output_norm_;
  }
  kernels::WeightMatrix eh_proj;
  RADIX_ASSIGN_OR_RETURN(eh_proj, w.RequireMatrix(p + "eh_proj.weight", H, 2 * H));
  mtp.eh_proj = pack(eh_proj);
  mtp.embedding = embedding_;
  if (w.Find(p + "embed_tokens.weight") != nullptr) {
    RADIX_ASSIGN_OR_RETURN(mtp.embedding,
                           w.RequireMatrix(p + "embed_tokens.weight", c.vocab_size, H));
  }
  if (w.Find(p + "shared_head_head.weight") != nullptr) {
    kernels::WeightMatrix head;
    RADIX_ASSIGN_OR_RETURN(head, w.RequireMatrix(p + "shared_head_head.weight", c.vocab_size, H));
    mtp.head = pack(head);
    mtp.own_head = true;
  }
  return Status::Ok();
}

Status DecoderStack::CheckShardable(const ModelConfig& c, const DecoderSpec& spec) {
  const int n = c.tensor_shard.size;
  const auto refuse = [&](const std::string& why) {
    return InvalidArgument("argument --tp-size: " + std::to_string(n) + " ranks cannot split " +
                           c.architecture + ": " + why);
  };
  if (spec.qk_norm_full) return refuse("its Q/K norms span every head");
  if (c.num_heads % n != 0) {
    return refuse("num_attention_heads " + std::to_string(c.num_heads) + " is not divisible");
  }
  if (!spec.mla && c.num_kv_heads % n != 0) {
    return refuse("num_key_value_heads " + std::to_string(c.num_kv_heads) + " is not divisible");
  }
  // Dense MLPs: all layers, or a MoE model's leading dense ones (MoeFfn checks its own split).
  const bool dense = !spec.moe || c.first_dense_layers > 0;
  if (dense && c.intermediate_size % n != 0) {
    return refuse("intermediate_size " + std::to_string(c.intermediate_size) + " is not divisible");
  }
  RADIX_CHECK(c.tensor_shard.group != nullptr);
  return Status::Ok();
}

Status DecoderStack::CheckStageable(const ModelConfig& c) {
  const int n = c.pipeline_stage.size;
  if (n > c.num_layers) {
    return InvalidArgument("argument --pp-size: " + std::to_string(n) +
                           " stages cannot split the " + std::to_string(c.num_layers) +
                           " layers of " + c.architecture + ": every stage needs a layer");
  }
  RADIX_CHECK(c.pipeline_stage.link != nullptr);
  return Status::Ok();
}

Expected<kernels::WeightMatrix> DecoderStack::ShardColumns(const kernels::WeightMatrix& m,
                                                           int64_t first, int64_t n,
                                                           const std::string& name) {
  if (auto columns = fused_.Columns(m, first, n)) return *columns;
  return ColumnShardError(m, n, name, config_.tensor_shard.size);
}

int DecoderStack::fused_qkv_layers() const {
  int n = 0;
  for (const Layer& l : layers_) n += l.qkv_fused ? 1 : 0;
  return n;
}

int DecoderStack::fused_gate_up_layers() const {
  int n = 0;
  for (const Layer& l : layers_) n += l.gate_up_fused ? 1 : 0;
  return n;
}

Status DecoderStack::Forward(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool,
                             float* logits, float* hidden) const {
  const ModelConfig& c = config_;
  if (c.hidden_states_only) {
    return Unsupported(c.architecture + " was loaded for hidden states only: it has no LM head");
  }
  const float* final_rows = nullptr;
  RADIX_ASSIGN_OR_RETURN(final_rows, RunToFinalRows(batch, kv, pool));
  // A tensor-parallel rank other than 0 or a pipeline stage other than 0.
  if (logits == nullptr) return Status::Ok();
  const int64_t H = c.hidden_size;
  if (!batch.hidden_indices.empty()) {
    RADIX_CHECK(hidden != nullptr);
    std::memcpy(hidden, final_rows + static_cast<int64_t>(batch.logit_indices.size()) * H,
                batch.hidden_indices.size() * static_cast<size_t>(H) * sizeof(float));
  }
  const int64_t n_out = static_cast<int64_t>(batch.logit_indices.size());
  kernels::MatMul(kernels::ActiveKernels(), pool, final_rows, n_out, lm_head_, logits,
                  activation_mode_);
  if (spec_.logit_scale != 1.0f) {
    const float inv = 1.0f / spec_.logit_scale;
    for (int64_t i = 0; i < n_out * c.vocab_size; ++i) logits[i] *= inv;
  }
  if (spec_.final_logit_softcap > 0) {
    const float cap = spec_.final_logit_softcap;
    for (int64_t i = 0; i < n_out * c.vocab_size; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
  }
  return Status::Ok();
}

Status DecoderStack::ForwardHidden(const ForwardBatch& batch, const KvCacheView& kv,
                                   ThreadPool* pool, float* hidden) const {
  const float* final_rows = nullptr;
  RADIX_ASSIGN_OR_RETURN(final_rows, RunToFinalRows(batch, kv, pool));
  std::memcpy(
      hidden, final_rows,
      batch.logit_indices.size() * static_cast<size_t>(config_.hidden_size) * sizeof(float));
  return Status::Ok();
}

Status DecoderStack::CheckInputs(const ForwardBatch& batch, const KvCacheView& kv,
                                 int64_t layers) const {
  const ModelConfig& c = config_;
  RADIX_CHECK(static_cast<int64_t>(kv.k.size()) == layers &&
              static_cast<int64_t>(kv.v.size()) == layers);
  RADIX_CHECK(kv.num_kv_heads == c.num_kv_heads && kv.head_dim == c.head_dim);
  for (int32_t id : batch.token_ids) {
    if (id < 0 || id >= c.vocab_size) {
      return InvalidArgument("token id " + std::to_string(id) + " is out of range [0, " +
                             std::to_string(c.vocab_size) + ")");
    }
  }
  return Status::Ok();
}

Expected<const float*> DecoderStack::RunToFinalRows(const ForwardBatch& batch,
                                                    const KvCacheView& kv, ThreadPool* pool) const {
  const ModelConfig& c = config_;
  RADIX_RETURN_IF_ERROR(CheckInputs(batch, kv, c.num_layers));
  if (c.pipeline_stage.split()) return RunPipelined(batch, kv, pool);
  const int64_t T = batch.num_tokens(), H = c.hidden_size;
  ForwardScratch& s = ForwardScratch::ForThisThread();
  float* x = ForwardScratch::Reserve(s.x, T * H);
  Embed(batch, x);
  RunLayers(batch, kv, pool);
  const kernels::KernelTable& kt = kernels::ActiveKernels();
  const auto n_logits = static_cast<int64_t>(batch.logit_indices.size());
  const int64_t n_out = n_logits + static_cast<int64_t>(batch.hidden_indices.size());
  const float eps = static_cast<float>(c.rms_norm_eps);
  float* final_rows = ForwardScratch::Reserve(s.final_rows, n_out * H);
  for (int64_t r = 0; r < n_out; ++r) {
    const int64_t t = r < n_logits ? batch.logit_indices[static_cast<size_t>(r)]
                                   : batch.hidden_indices[static_cast<size_t>(r - n_logits)];
    kt.rms_norm(x + t * H, output_norm_.data(), spec_.norm_offset, eps, final_rows + r * H, H);
  }
  return static_cast<const float*>(final_rows);
}

namespace {

// One piece of a step under pipeline parallelism: a ForwardBatch over tokens [first, first + T)
// of the step (sequences cut where the piece's range cuts them), and the step's wanted rows
// (logit_indices, then hidden_indices) that fall in it: their token index within the piece and
// their place among the final rows.
struct MicroBatch {
  ForwardBatch batch;
  std::vector<int64_t> rows;
  std::vector<int64_t> outputs;
};

std::vector<MicroBatch> CutMicroBatches(const ForwardBatch& batch, int64_t count) {
  const int64_t T = batch.num_tokens();
  std::vector<MicroBatch> micro(static_cast<size_t>(count));
  std::vector<int64_t> bounds(static_cast<size_t>(count) + 1);
  for (int64_t i = 0; i <= count; ++i) bounds[static_cast<size_t>(i)] = T * i / count;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t lo = bounds[static_cast<size_t>(i)], hi = bounds[static_cast<size_t>(i) + 1];
    ForwardBatch& b = micro[static_cast<size_t>(i)].batch;
    b.token_ids.assign(batch.token_ids.begin() + lo, batch.token_ids.begin() + hi);
    b.positions.assign(batch.positions.begin() + lo, batch.positions.begin() + hi);
    int64_t start = 0;  // the sequence's first token in the step
    for (const SequenceExtend& seq : batch.sequences) {
      const int64_t a = std::max(lo, start), e = std::min(hi, start + seq.extend_len);
      if (a < e) {
        // Pipeline parallelism refuses speculation, so no tree is ever cut here.
        RADIX_CHECK(seq.tree_parents.empty());
        SequenceExtend piece = seq;
        piece.prefix_len = seq.prefix_len + (a - start);
        piece.extend_len = e - a;
        piece.kv_slots = seq.kv_slots.first(static_cast<size_t>(piece.prefix_len + e - a));
        b.sequences.push_back(piece);
      }
      start += seq.extend_len;
    }
  }
  const size_t n_logits = batch.logit_indices.size();
  for (size_t r = 0; r < n_logits + batch.hidden_indices.size(); ++r) {
    const int64_t t = r < n_logits ? batch.logit_indices[r] : batch.hidden_indices[r - n_logits];
    const auto i =
        static_cast<size_t>(std::upper_bound(bounds.begin(), bounds.end(), t) - bounds.begin() - 1);
    micro[i].rows.push_back(t - bounds[i]);
    micro[i].outputs.push_back(static_cast<int64_t>(r));
  }
  return micro;
}

}  // namespace

const float* DecoderStack::RunPipelined(const ForwardBatch& batch, const KvCacheView& kv,
                                        ThreadPool* pool) const {
  const ModelConfig& c = config_;
  const PipelineStage& stage = c.pipeline_stage;
  StageLink& link = *stage.link;
  const bool first = stage.rank == 0, last = stage.rank == stage.size - 1;
  // Rows go from the last stage to stage 0 between tensor-parallel ranks 0 (those with logits).
  const bool rows_rank = c.tensor_shard.rank == 0;
  const int64_t H = c.hidden_size;
  ForwardScratch& s = ForwardScratch::ForThisThread();
  const std::vector<MicroBatch> micro = CutMicroBatches(
      batch,
      MicroBatchCount(stage, batch.num_tokens(), static_cast<int64_t>(batch.sequences.size())));
  for (const MicroBatch& mb : micro) {
    const int64_t T = mb.batch.num_tokens();
    float* x = ForwardScratch::Reserve(s.x, T * H);
    if (first) {
      Embed(mb.batch, x);
    } else {
      link.ReceiveFrom(stage.rank - 1, x, T * H);
    }
    RunLayers(mb.batch, kv, pool);
    if (!last) {
      link.SendTo(stage.rank + 1, x, T * H);
    } else if (rows_rank && !mb.rows.empty()) {
      const auto n = static_cast<int64_t>(mb.rows.size());
      float* rows = ForwardScratch::Reserve(s.stage_rows, n * H);
      for (int64_t r = 0; r < n; ++r) {
        std::memcpy(rows + r * H, x + mb.rows[static_cast<size_t>(r)] * H, H * sizeof(float));
      }
      link.SendTo(0, rows, n * H);
    }
  }
  const int64_t n_out =
      static_cast<int64_t>(batch.logit_indices.size() + batch.hidden_indices.size());
  float* final_rows = ForwardScratch::Reserve(s.final_rows, n_out * H);
  if (first && rows_rank) {
    const kernels::KernelTable& kt = kernels::ActiveKernels();
    const float eps = static_cast<float>(c.rms_norm_eps);
    for (const MicroBatch& mb : micro) {
      if (mb.rows.empty()) continue;
      const auto n = static_cast<int64_t>(mb.rows.size());
      float* rows = ForwardScratch::Reserve(s.stage_rows, n * H);
      link.ReceiveFrom(stage.size - 1, rows, n * H);
      for (int64_t r = 0; r < n; ++r) {
        kt.rms_norm(rows + r * H, output_norm_.data(), spec_.norm_offset, eps,
                    final_rows + mb.outputs[static_cast<size_t>(r)] * H, H);
      }
    }
  }
  link.Flush();
  return final_rows;
}

void DecoderStack::Embed(const ForwardBatch& batch, float* x) const {
  const int64_t T = batch.num_tokens(), H = config_.hidden_size;
  for (int64_t t = 0; t < T; ++t) {
    kernels::DequantizeRow(embedding_, batch.token_ids[static_cast<size_t>(t)], x + t * H);
  }
  if (spec_.embed_scale != 1.0f) {
    for (int64_t i = 0; i < T * H; ++i) x[i] *= spec_.embed_scale;
  }
}

void DecoderStack::RunLayers(const ForwardBatch& batch, const KvCacheView& kv,
                             ThreadPool* pool) const {
  const BatchLayout layout = BatchLayout::Build(batch, kv.num_slots);
  const Step step = PrepareStep(batch, layout, pool);
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    RunLayer(step, layers_[static_cast<size_t>(l)], kv.k[static_cast<size_t>(l)],
             kv.v[static_cast<size_t>(l)]);
  }
}

DecoderStack::Step DecoderStack::PrepareStep(const ForwardBatch& batch, const BatchLayout& layout,
                                             ThreadPool* pool) const {
  const ModelConfig& c = config_;
  const int64_t T = batch.num_tokens();
  const kernels::KernelTable& kt = kernels::ActiveKernels();
  ForwardScratch& s = ForwardScratch::ForThisThread();
  Step step{&kt, pool, &batch, &layout, &s, T, {}, {}, false};
  // Token rows of sequences with an adapter, grouped by adapter (in order of each adapter's first
  // sequence), so that a thread's share of rows mostly reads one adapter's matrices.
  s.lora_rows.clear();
  s.lora_row_adapter.clear();
  {
    std::vector<const LoraAdapter*> adapters;
    for (const SequenceExtend& seq : batch.sequences) {
      if (seq.lora != nullptr &&
          std::find(adapters.begin(), adapters.end(), seq.lora) == adapters.end()) {
        adapters.push_back(seq.lora);
      }
    }
    for (const LoraAdapter* adapter : adapters) {
      int64_t row = 0;
      for (const SequenceExtend& seq : batch.sequences) {
        if (seq.lora == adapter) {
          for (int64_t i = 0; i < seq.extend_len; ++i) {
            s.lora_rows.push_back(static_cast<int32_t>(row + i));
            s.lora_row_adapter.push_back(adapter);
          }
        }
        row += seq.extend_len;
      }
    }
    step.lora = !s.lora_rows.empty();
  }
  const int64_t half = c.rotary_dim / 2;
  const bool local_rope = spec_.sliding_window_layers && !spec_.inv_freq_local.empty();
  for (int set = 0; set < (local_rope ? 2 : 1); ++set) {
    float* cos = ForwardScratch::Reserve(s.rope_cos[set], T * half);
    float* sin = ForwardScratch::Reserve(s.rope_sin[set], T * half);
    kernels::RopeTable(batch.positions.data(), T, set == 0 ? spec_.inv_freq : spec_.inv_freq_local,
                       set == 0 ? spec_.rope_attention_factor : 1.0f, cos, sin);
    step.rope_cos[set] = cos;
    step.rope_sin[set] = sin;
  }
  if (!local_rope) {
    step.rope_cos[1] = step.rope_cos[0];
    step.rope_sin[1] = step.rope_sin[0];
  }
  return step;
}

Status DecoderStack::ForwardMtp(const ForwardBatch& batch, const float* h_in, const KvCacheView& kv,
                                ThreadPool* pool, float* logits, float* h_out) const {
  const ModelConfig& c = config_;
  if (!mtp_) {
    return Unsupported(c.architecture + " was loaded without its multi-token-prediction block");
  }
  RADIX_RETURN_IF_ERROR(CheckInputs(batch, kv, 1));
  const Mtp& m = *mtp_;
  const int64_t T = batch.num_tokens(), H = c.hidden_size;
  const kernels::KernelTable& kt = kernels::ActiveKernels();
  ForwardScratch& s = ForwardScratch::ForThisThread();
  const float eps = static_cast<float>(c.rms_norm_eps), off = spec_.norm_offset;
  // [enorm(embedding) | hnorm(h_in)] per token, then eh_proj into the residual stream.
  float* in = ForwardScratch::Reserve(s.mtp_in, T * 2 * H);
  ForRows(pool, T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* row = in + t * 2 * H;
      kernels::DequantizeRow(m.embedding, batch.token_ids[static_cast<size_t>(t)], row);
      kt.rms_norm(row, m.enorm.data(), off, eps, row, H);
      kt.rms_norm(h_in + t * H, m.hnorm.data(), off, eps, row + H, H);
    }
  });
  float* x = ForwardScratch::Reserve(s.x, T * H);
  kernels::MatMul(kt, pool, in, T, m.eh_proj, x, activation_mode_);
  const BatchLayout layout = BatchLayout::Build(batch, kv.num_slots);
  RunLayer(PrepareStep(batch, layout, pool), m.layer, kv.k[0], kv.v[0]);
  const auto n_out = static_cast<int64_t>(batch.logit_indices.size());
  float* rows = ForwardScratch::Reserve(s.final_rows, n_out * H);
  for (int64_t r = 0; r < n_out; ++r) {
    const int64_t t = batch.logit_indices[static_cast<size_t>(r)];
    kt.rms_norm(x + t * H, m.head_norm.data(), off, eps, rows + r * H, H);
  }
  if (h_out != nullptr) std::memcpy(h_out, rows, static_cast<size_t>(n_out * H) * sizeof(float));
  kernels::MatMul(kt, pool, rows, n_out, m.own_head ? m.head : lm_head_, logits, activation_mode_);
  return Status::Ok();
}

void DecoderStack::RunLayer(const Step& step, const Layer& layer, LayerCache k_cache,
                            LayerCache v_cache) const {
  const ModelConfig& c = config_;
  const kernels::KernelTable& kt = *step.kt;
  ForwardScratch& s = *step.s;
  ThreadPool* pool = step.pool;
  const int64_t T = step.tokens, H = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps), off = spec_.norm_offset;
  const kernels::ActivationMode act = activation_mode_;
  float* x = s.x.data();
  float* h = ForwardScratch::Reserve(s.h, T * H);

  if (spec_.pre_norms) {
    ForRows(pool, T, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        kt.rms_norm(x + t * H, layer.attn_norm.data(), off, eps, h + t * H, H);
    });
  } else {
    std::memcpy(h, x, sizeof(float) * static_cast<size_t>(T * H));
  }
  Attention(step, layer, k_cache, v_cache, h);

  // Residual, then the MLP's input norm, in one pass over each row.
  ForRows(pool, T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* ht = h + t * H;
      if (!layer.o_bias.empty()) kt.axpy(1.0f, layer.o_bias.data(), ht, H);
      if (spec_.sandwich_norms) kt.rms_norm(ht, layer.post_attn_norm.data(), off, eps, ht, H);
      kt.axpy(spec_.residual_scale, ht, x + t * H, H);
      if (spec_.pre_norms) {
        kt.rms_norm(x + t * H, layer.ffn_norm.data(), off, eps, ht, H);
      } else {
        std::memcpy(ht, x + t * H, sizeof(float) * static_cast<size_t>(H));
      }
    }
  });

  if (layer.moe) {
    const LoraRows lora{s.lora_rows, s.lora_row_adapter};
    layer.moe->Forward(kt, pool, h, T, act, s, h, step.lora ? &lora : nullptr);
    if (c.tensor_shard.sharded()) c.tensor_shard.group->AllReduceSum(h, T * H);
    if (step.batch->expert_choices != nullptr) RecordChoices(step, layer);
  } else {
    DenseMlp(step, layer, h);
  }
  ForRows(pool, T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* ht = h + t * H;
      if (spec_.sandwich_norms) kt.rms_norm(ht, layer.post_ffn_norm.data(), off, eps, ht, H);
      kt.axpy(spec_.residual_scale, ht, x + t * H, H);
    }
  });
}

void DecoderStack::Attention(const Step& step, const Layer& layer, LayerCache k_cache,
                             LayerCache v_cache, float* h) const {
  const ModelConfig& c = config_;
  const kernels::KernelTable& kt = *step.kt;
  ForwardScratch& s = *step.s;
  ThreadPool* pool = step.pool;
  const int64_t T = step.tokens, H = c.hidden_size, D = c.head_dim;
  const int64_t q_dim = c.num_heads * D, kv_dim = c.num_kv_heads * D;
  const float eps = static_cast<float>(c.rms_norm_eps), off = spec_.norm_offset;
  const kernels::ActivationMode act = activation_mode_;
  if (layer.mla) {
    const LoraRows lora{s.lora_rows, s.lora_row_adapter};
    const MlaAttention::Step mla_step{&kt,
                                      pool,
                                      step.batch,
                                      step.layout,
                                      &s,
                                      step.rope_cos[0],
                                      step.rope_sin[0],
                                      act,
                                      step.lora ? &lora : nullptr,
                                      layer.index};
    layer.mla->Forward(mla_step, T, h, k_cache, h);
    if (c.tensor_shard.sharded()) c.tensor_shard.group->AllReduceSum(h, T * H);
    return;
  }

  // Projections: q, k, v rows of token t start at q + t * q_stride and k/v + t * kv_stride.
  float *q, *k, *v;
  int64_t q_stride, kv_stride;
  if (layer.qkv_fused) {
    q = ForwardScratch::Reserve(s.qkv, T * (q_dim + 2 * kv_dim));
    kernels::MatMul(kt, pool, h, T, layer.q, q, act);
    k = q + q_dim;
    v = k + kv_dim;
    q_stride = kv_stride = q_dim + 2 * kv_dim;
  } else {
    q = ForwardScratch::Reserve(s.qkv, T * q_dim);
    k = ForwardScratch::Reserve(s.k, T * kv_dim);
    v = ForwardScratch::Reserve(s.v, T * kv_dim);
    kernels::MatMul(kt, pool, h, T, layer.q, q, act);
    kernels::MatMul(kt, pool, h, T, layer.k, k, act);
    kernels::MatMul(kt, pool, h, T, layer.v, v, act);
    q_stride = q_dim;
    kv_stride = kv_dim;
  }
  if (step.lora) {
    ApplyLora(step, layer, h,
              {{LoraTarget::kQ, q, q_stride},
               {LoraTarget::kK, k, kv_stride},
               {LoraTarget::kV, v, kv_stride}});
  }
  const int rope_set = layer.sliding ? 1 : 0;
  const int64_t half = c.rotary_dim / 2;
  ForRows(pool, T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* qt = q + t * q_stride;
      float* kt_row = k + t * kv_stride;
      float* vt = v + t * kv_stride;
      if (spec_.qkv_bias) {
        const float* bias = layer.qkv_bias.data();
        kt.axpy(1.0f, bias, qt, q_dim);
        kt.axpy(1.0f, bias + q_dim, kt_row, kv_dim);
        kt.axpy(1.0f, bias + q_dim + kv_dim, vt, kv_dim);
      }
      if (spec_.qk_norm && spec_.qk_norm_full) {
        kt.rms_norm(qt, layer.q_norm.data(), off, eps, qt, q_dim);
        kt.rms_norm(kt_row, layer.k_norm.data(), off, eps, kt_row, kv_dim);
      } else if (spec_.qk_norm) {
        for (int64_t hd = 0; hd < c.num_heads; ++hd)
          kt.rms_norm(qt + hd * D, layer.q_norm.data(), off, eps, qt + hd * D, D);
        for (int64_t hd = 0; hd < c.num_kv_heads; ++hd)
          kt.rms_norm(kt_row + hd * D, layer.k_norm.data(), off, eps, kt_row + hd * D, D);
      }
      if (!layer.rope) continue;
      const float* cos = step.rope_cos[rope_set] + t * half;
      const float* sin = step.rope_sin[rope_set] + t * half;
      kernels::ApplyRopeRows(qt, 1, q_stride, static_cast<int>(c.num_heads), static_cast<int>(D),
                             static_cast<int>(c.rotary_dim), cos, sin, spec_.rope_layout);
      kernels::ApplyRopeRows(kt_row, 1, kv_stride, static_cast<int>(c.num_kv_heads),
                             static_cast<int>(D), static_cast<int>(c.rotary_dim), cos, sin,
                             spec_.rope_layout);
    }
  });
  // Attention reads contiguous [T, width] rows: split the stacked projection of a multi-token
  // step (a single token's q, k and v are already contiguous).
  if (layer.qkv_fused && T > 1) {
    float* qs = ForwardScratch::Reserve(s.q_split, T * q_dim);
    float* ks = ForwardScratch::Reserve(s.k_split, T * kv_dim);
    float* vs = ForwardScratch::Reserve(s.v_split, T * kv_dim);
    ForRows(pool, T, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        std::memcpy(qs + t * q_dim, q + t * q_stride, sizeof(float) * q_dim);
        std::memcpy(ks + t * kv_dim, k + t * kv_stride, sizeof(float) * kv_dim);
        std::memcpy(vs + t * kv_dim, v + t * kv_stride, sizeof(float) * kv_dim);
      }
    });
    q = qs;
    k = ks;
    v = vs;
  }
  float* attn = ForwardScratch::Reserve(s.attn, T * q_dim);
  PagedAttention(kt, pool, *step.batch, *step.layout, spec_.attention, layer.sliding_window, q, k,
                 v, k_cache, v_cache, attn, layer.sinks.empty() ? nullptr : layer.sinks.data());
  kernels::MatMul(kt, pool, attn, T, layer.o, h, act);
  if (step.lora) ApplyLora(step, layer, attn, {{LoraTarget::kO, h, c.hidden_size}});
  if (c.tensor_shard.sharded()) c.tensor_shard.group->AllReduceSum(h, T * H);
}

void DecoderStack::RecordChoices(const Step& step, const Layer& layer) const {
  ExpertChoices& record = *step.batch->expert_choices;
  const int64_t T = step.tokens, K = config_.num_experts_per_tok, E = config_.num_experts;
  const ExpertPlacement& placement = layer.moe->placement();
  const int64_t P = placement.num_physical();
  RADIX_CHECK(record.num_experts == E && record.top_k == K && record.num_physical == P);
  const int32_t* choice = step.s->moe_choice.data();  // MoeFfn's routing of this step
  const int32_t* slot = step.s->moe_slot.data();
  int32_t* counts = record.counts.data() + layer.index * E;
  int32_t* physical_counts = record.physical_counts.data() + layer.index * P;
  for (int64_t i = 0; i < T * K; ++i) {
    ++counts[choice[i]];
    ++physical_counts[slot[i]];
  }
  std::copy(placement.physical_to_logical().begin(), placement.physical_to_logical().end(),
            record.physical_to_logical.begin() + layer.index * P);
  if (record.per_token) {
    std::copy(choice, choice + T * K, record.topk_ids.begin() + layer.index * T * K);
  }
}

void DecoderStack::DenseMlp(const Step& step, const Layer& layer, float* h) const {
  const kernels::KernelTable& kt = *step.kt;
  ForwardScratch& s = *step.s;
  ThreadPool* pool = step.pool;
  const int64_t T = step.tokens, I = config_.intermediate_size;
  const kernels::ActivationMode act = activation_mode_;
  float *gate, *up;
  int64_t gu_stride;
  if (layer.gate_up_fused) {
    gate = ForwardScratch::Reserve(s.gate_up, T * 2 * I);
    kernels::MatMul(kt, pool, h, T, layer.gate, gate, act);
    up = gate + I;
    gu_stride = 2 * I;
  } else {
    gate = ForwardScratch::Reserve(s.gate_up, T * I);
    up = ForwardScratch::Reserve(s.up, T * I);
    kernels::MatMul(kt, pool, h, T, layer.gate, gate, act);
    kernels::MatMul(kt, pool, h, T, layer.up, up, act);
    gu_stride = I;
  }
  if (step.lora) {
    ApplyLora(step, layer, h,
              {{LoraTarget::kGate, gate, gu_stride}, {LoraTarget::kUp, up, gu_stride}});
  }
  float* gated = ForwardScratch::Reserve(s.gated, T * I);
  // llama.cpp numerics (GGUF) evaluate GELU through its f16 table; HF checkpoints use the formula.
  const auto gating = spec_.activation == GatedActivation::kSilu     ? kt.silu_mul
                      : act == kernels::ActivationMode::kGgmlRounded ? kernels::GeluTanhF16TableMul
                                                                     : kt.gelu_tanh_mul;
  ForRows(pool, T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      gating(gate + t * gu_stride, up + t * gu_stride, gated + t * I, I);
  });
  kernels::MatMul(kt, pool, gated, T, layer.down, h, act);
  if (step.lora) ApplyLora(step, layer, gated, {{LoraTarget::kDown, h, config_.hidden_size}});
  if (config_.tensor_shard.sharded()) {
    config_.tensor_shard.group->AllReduceSum(h, T * config_.hidden_size);
  }
}

void DecoderStack::ApplyLora(const Step& step, const Layer& layer, const float* x,
                             std::initializer_list<LoraOut> outs) const {
  const LoraRows rows{step.s->lora_rows, step.s->lora_row_adapter};
  ApplyLoraRows(*step.kt, step.pool, rows, layer.index, x, outs);
}

}  // namespace radixserve::model

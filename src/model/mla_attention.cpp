#include "model/mla_attention.h"

#include <algorithm>
#include <cstring>

#include "model/for_rows.h"
#include "model/forward_scratch.h"

namespace radixserve::model {

Status MlaAttention::Load(const ModelConfig& c, const std::string& p, WeightStore& w,
                          const PackFn& pack, const MoeFfn::ColumnsFn& columns,
                          const kernels::AttentionShape& shape, kernels::RopeLayout rope_layout) {
  const ModelConfig::Mla& m = c.mla;
  const TensorShard& shard = c.tensor_shard;
  heads_ = c.num_heads / shard.size;
  const int64_t head0 = shard.rank * heads_;  // this rank's first head
  nope_ = m.qk_nope_head_dim;
  rope_ = m.qk_rope_head_dim;
  v_dim_ = m.v_head_dim;
  kv_rank_ = m.kv_lora_rank;
  q_rank_ = m.q_lora_rank;
  hidden_ = c.hidden_size;
  eps_ = static_cast<float>(c.rms_norm_eps);
  shape_ = shape;
  rope_layout_ = rope_layout;
  const int64_t H = hidden_, qk = nope_ + rope_, all_heads = c.num_heads;
  kernels::WeightMatrix matrix;
  if (q_rank_ > 0) {
    RADIX_ASSIGN_OR_RETURN(matrix, w.RequireMatrix(p + "attn_q_a.weight", q_rank_, H));
    q_a_ = pack(matrix);
    RADIX_ASSIGN_OR_RETURN(q_a_norm_, w.RequireVector(p + "attn_q_a_norm.weight", q_rank_));
    RADIX_ASSIGN_OR_RETURN(matrix, w.RequireMatrix(p + "attn_q_b.weight", all_heads * qk, q_rank_));
    q_b_ = pack(matrix.Rows(head0 * qk, heads_ * qk));
  } else {
    RADIX_ASSIGN_OR_RETURN(matrix, w.RequireMatrix(p + "attn_q.weight", all_heads * qk, H));
    q_ = pack(matrix.Rows(head0 * qk, heads_ * qk));
  }
  RADIX_ASSIGN_OR_RETURN(matrix, w.RequireMatrix(p + "attn_kv_a_mqa.weight", kv_rank_ + rope_, H));
  kv_a_ = pack(matrix);
  RADIX_ASSIGN_OR_RETURN(kv_a_norm_, w.RequireVector(p + "attn_kv_a_norm.weight", kv_rank_));
  RADIX_ASSIGN_OR_RETURN(matrix, w.RequireMatrix(p + "attn_output.weight", H, all_heads * v_dim_));
  if (shard.sharded()) {
    RADIX_ASSIGN_OR_RETURN(
        matrix, columns(matrix, head0 * v_dim_, heads_ * v_dim_, p + "attn_output.weight"));
  }
  o_ = pack(matrix);

  k_b_.clear();
  v_b_.clear();
  if (w.Find(p + "attn_kv_b.weight") == nullptr) {
    std::vector<kernels::WeightMatrix> k_b, v_b;
    RADIX_ASSIGN_OR_RETURN(k_b, w.RequireExperts(p + "attn_k_b", all_heads, kv_rank_, nope_));
    RADIX_ASSIGN_OR_RETURN(v_b, w.RequireExperts(p + "attn_v_b", all_heads, v_dim_, kv_rank_));
    for (int64_t h = head0; h < head0 + heads_; ++h) {
      k_b_.push_back(pack(k_b[static_cast<size_t>(h)]));
      v_b_.push_back(pack(v_b[static_cast<size_t>(h)]));
    }
    return Status::Ok();
  }
  // kv_b: per head, nope_ rows (keys: transposed into [kv_rank, nope] for the absorption) then
  // v_dim_ rows (values, used as they are).
  RADIX_ASSIGN_OR_RETURN(
      matrix, w.RequireMatrix(p + "attn_kv_b.weight", all_heads * (nope_ + v_dim_), kv_rank_));
  auto owned = std::make_shared<std::vector<float>>(
      static_cast<size_t>(heads_ * kv_rank_ * (nope_ + v_dim_)));
  std::vector<float> row(static_cast<size_t>(kv_rank_));
  for (int64_t h = 0; h < heads_; ++h) {
    float* kb = owned->data() + h * kv_rank_ * (nope_ + v_dim_);
    float* vb = kb + kv_rank_ * nope_;
    const int64_t first = (head0 + h) * (nope_ + v_dim_);
    for (int64_t i = 0; i < nope_; ++i) {
      kernels::DequantizeRow(matrix, first + i, row.data());
      for (int64_t j = 0; j < kv_rank_; ++j) kb[j * nope_ + i] = row[static_cast<size_t>(j)];
    }
    for (int64_t i = 0; i < v_dim_; ++i)
      kernels::DequantizeRow(matrix, first + nope_ + i, vb + i * kv_rank_);
    k_b_.push_back(pack({kernels::WeightFormat::kF32, kv_rank_, nope_, kb}));
    v_b_.push_back(pack({kernels::WeightFormat::kF32, v_dim_, kv_rank_, vb}));
  }
  owned_ = std::move(owned);
  return Status::Ok();
}

void MlaAttention::PerHead(const Step& step, int64_t T, const std::vector<kernels::PackedWeight>& w,
                           const float* in, int64_t in_stride, int64_t in_head, int64_t in_width,
                           float* out, int64_t out_stride, int64_t out_head) const {
  ForwardScratch& s = *step.s;
  const int64_t out_width = w.front().source.rows;
  // Head h's rows gathered into x, multiplied into y, scattered into out.
  const auto head = [&](int64_t h, float* x, float* y, ThreadPool* pool) {
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(x + t * in_width, in + t * in_stride + h * in_head,
                  sizeof(float) * static_cast<size_t>(in_width));
    }
    kernels::MatMul(*step.kt, pool, x, T, w[static_cast<size_t>(h)], y, step.mode);
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(out + t * out_stride + h * out_head, y + t * out_width,
                  sizeof(float) * static_cast<size_t>(out_width));
    }
  };
  // Small steps (decode): one pool job per head, each multiplying on its own thread, instead of
  // one parallel MatMul per head whose jobs would hold a few rows each. A matmul row's value does
  // not depend on how the rows are split over threads, so both ways give the same bits.
  if (step.pool != nullptr && T * heads_ * std::max(in_width, out_width) <= kHeadJobsMaxFloats) {
    float* x = ForwardScratch::Reserve(s.mla_in, heads_ * T * in_width);
    float* y = ForwardScratch::Reserve(s.mla_out, heads_ * T * out_width);
    step.pool->ParallelFor(heads_, 1, [&](int64_t begin, int64_t end) {
      for (int64_t h = begin; h < end; ++h) {
        head(h, x + h * T * in_width, y + h * T * out_width, nullptr);
      }
    });
    return;
  }
  float* x = ForwardScratch::Reserve(s.mla_in, T * in_width);
  float* y = ForwardScratch::Reserve(s.mla_out, T * out_width);
  for (int64_t h = 0; h < heads_; ++h) head(h, x, y, step.pool);
}

void MlaAttention::Forward(const Step& step, int64_t T, const float* h, kernels::KvBuffer cache,
                           float* out) const {
  const kernels::KernelTable& kt = *step.kt;
  ForwardScratch& s = *step.s;
  ThreadPool* pool = step.pool;
  const int64_t qk = nope_ + rope_, row = kv_rank_ + rope_, q_width = heads_ * qk;
  float* q = ForwardScratch::Reserve(s.qkv, T * q_width);
  if (q_rank_ > 0) {
    float* q_a = ForwardScratch::Reserve(s.k, T * q_rank_);
    kernels::MatMul(kt, pool, h, T, q_a_, q_a, step.mode);
    if (step.lora)
      ApplyLoraRows(kt, pool, *step.lora, step.layer, h, {{LoraTarget::kQa, q_a, q_rank_}});
    ForRows(pool, T, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        kt.rms_norm(q_a + t * q_rank_, q_a_norm_.data(), 0.0f, eps_, q_a + t * q_rank_, q_rank_);
    });
    kernels::MatMul(kt, pool, q_a, T, q_b_, q, step.mode);
    if (step.lora) {
      ApplyLoraRows(kt, pool, *step.lora, step.layer, q_a, {{LoraTarget::kQb, q, q_width}});
    }
  } else {
    kernels::MatMul(kt, pool, h, T, q_, q, step.mode);
    if (step.lora)
      ApplyLoraRows(kt, pool, *step.lora, step.layer, h, {{LoraTarget::kQ, q, q_width}});
  }
  // The cached rows [c | k_pe]: c normed, k_pe rotated; and each head's q_pe rotated.
  float* kv = ForwardScratch::Reserve(s.v, T * row);
  kernels::MatMul(kt, pool, h, T, kv_a_, kv, step.mode);
  if (step.lora) ApplyLoraRows(kt, pool, *step.lora, step.layer, h, {{LoraTarget::kKvA, kv, row}});
  ForRows(pool, T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* r = kv + t * row;
      kt.rms_norm(r, kv_a_norm_.data(), 0.0f, eps_, r, kv_rank_);
      const float* cos = step.rope_cos + t * (rope_ / 2);
      const float* sin = step.rope_sin + t * (rope_ / 2);
      const int rope = static_cast<int>(rope_);
      kernels::ApplyRopeRows(r + kv_rank_, 1, row, 1, rope, rope, cos, sin, rope_layout_);
      kernels::ApplyRopeRows(q + t * q_width + nope_, 1, q_width, static_cast<int>(heads_),
                             static_cast<int>(qk), rope, cos, sin, rope_layout_);
    }
  });
  // Absorbed queries [q_lat | q_pe] per head.
  float* q_abs = ForwardScratch::Reserve(s.q_split, T * heads_ * row);
  PerHead(step, T, k_b_, q, q_width, qk, nope_, q_abs, heads_ * row, row);
  ForRows(pool, T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t hd = 0; hd < heads_; ++hd) {
        std::memcpy(q_abs + (t * heads_ + hd) * row + kv_rank_, q + t * q_width + hd * qk + nope_,
                    sizeof(float) * static_cast<size_t>(rope_));
      }
    }
  });
  if (step.lora) KvBLora(step, /*keys=*/true, q, q_abs, nullptr, nullptr);
  float* attn = ForwardScratch::Reserve(s.attn, T * heads_ * row);
  PagedAttention(kt, pool, *step.batch, *step.layout, shape_, 0, q_abs, kv, kv, cache, cache, attn);
  // Each head's latent output (the first kv_rank_ of its row) up to v_head_dim, then W_o.
  float* values = ForwardScratch::Reserve(s.k_split, T * heads_ * v_dim_);
  PerHead(step, T, v_b_, attn, heads_ * row, row, kv_rank_, values, heads_ * v_dim_, v_dim_);
  if (step.lora) KvBLora(step, /*keys=*/false, nullptr, nullptr, attn, values);
  kernels::MatMul(kt, pool, values, T, o_, out, step.mode);
  if (step.lora) {
    ApplyLoraRows(kt, pool, *step.lora, step.layer, values, {{LoraTarget::kO, out, hidden_}});
  }
}

void MlaAttention::KvBLora(const Step& step, bool keys, const float* q, float* q_abs,
                           const float* attn, float* values) const {
  const kernels::KernelTable& kt = *step.kt;
  const LoraRows& lora = *step.lora;
  const int64_t qk = nope_ + rope_, row = kv_rank_ + rope_, per_head = nope_ + v_dim_;
  // Each adapted row on one thread, heads and ranks in order: batch-invariant like
  // ApplyLoraRows.
  const auto update = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const LoraWeights* w =
          lora.adapters[static_cast<size_t>(i)]->Find(step.layer, LoraTarget::kKvB);
      if (w == nullptr) continue;
      const int64_t t = lora.rows[static_cast<size_t>(i)];
      for (int64_t hd = 0; hd < heads_; ++hd) {
        if (keys) {
          const float* q_nope = q + t * heads_ * qk + hd * qk;
          float* q_lat = q_abs + (t * heads_ + hd) * row;
          for (int64_t k = 0; k < w->rank; ++k) {
            w->AxpyA(kt, k, w->scale * w->DotRange(kt, k, hd * per_head, nope_, q_nope), q_lat);
          }
        } else {
          const float* o_lat = attn + (t * heads_ + hd) * row;
          float* v = values + (t * heads_ + hd) * v_dim_;
          for (int64_t k = 0; k < w->rank; ++k) {
            w->ExpandRange(kt, k, w->Shrink(kt, k, o_lat), hd * per_head + nope_, v_dim_, v);
          }
        }
      }
    }
  };
  ForEachLoraRow(step.pool, lora, update);
}

}  // namespace radixserve::model

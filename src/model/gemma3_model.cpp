#include "model/gemma3_model.h"

#include <cmath>

#include "model/assign_or_return.h"
#include "model/paged_attention.h"

namespace radixserve::model {

Expected<std::unique_ptr<CausalLM>> Gemma3Model::Create(ModelConfig config,
                                                        std::unique_ptr<WeightStore> weights) {
  std::unique_ptr<Gemma3Model> model(new Gemma3Model(std::move(config), std::move(weights)));
  RADIX_RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<CausalLM>(std::move(model));
}

Status Gemma3Model::Load() {
  const ModelConfig& c = config_;
  if (c.hidden_act != "gelu_pytorch_tanh" && c.hidden_act != "gelu_tanh" &&
      c.hidden_act != "gelu") {
    return Unsupported(c.architecture + ": hidden_activation '" + c.hidden_act +
                       "' is not supported");
  }
  WeightStore& w = *weights_;
  norm_offset_ = w.from_gguf() ? 0.0f : 1.0f;
  const int rot = static_cast<int>(c.rotary_dim);
  inv_freq_global_ = kernels::RopeInvFreq(c.rope_theta, rot, c.rope_scaling);
  inv_freq_local_ = kernels::RopeInvFreq(c.rope_local_theta, rot, {});
  const int64_t H = c.hidden_size, q_dim = c.num_heads * c.head_dim,
                kv_dim = c.num_kv_heads * c.head_dim;
  const int64_t I = c.intermediate_size;
  RADIX_ASSIGN_OR_RETURN(embedding_, w.RequireMatrix("token_embd.weight", c.vocab_size, H));
  RADIX_ASSIGN_OR_RETURN(output_norm_, w.RequireVector("output_norm.weight", H));
  if (w.Find("output.weight") != nullptr) {
    return Unsupported(w.description() + ": Gemma 3 with an untied output.weight is not supported");
  }
  layers_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    Layer& layer = layers_[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    layer.sliding = c.layer_is_sliding[static_cast<size_t>(l)];
    RADIX_ASSIGN_OR_RETURN(layer.attn_norm, w.RequireVector(p + "attn_norm.weight", H));
    RADIX_ASSIGN_OR_RETURN(layer.post_attn_norm,
                           w.RequireVector(p + "post_attention_norm.weight", H));
    RADIX_ASSIGN_OR_RETURN(layer.ffn_norm, w.RequireVector(p + "ffn_norm.weight", H));
    RADIX_ASSIGN_OR_RETURN(layer.post_ffn_norm, w.RequireVector(p + "post_ffw_norm.weight", H));
    RADIX_ASSIGN_OR_RETURN(layer.q_norm, w.RequireVector(p + "attn_q_norm.weight", c.head_dim));
    RADIX_ASSIGN_OR_RETURN(layer.k_norm, w.RequireVector(p + "attn_k_norm.weight", c.head_dim));
    RADIX_ASSIGN_OR_RETURN(layer.q, w.RequireMatrix(p + "attn_q.weight", q_dim, H));
    RADIX_ASSIGN_OR_RETURN(layer.k, w.RequireMatrix(p + "attn_k.weight", kv_dim, H));
    RADIX_ASSIGN_OR_RETURN(layer.v, w.RequireMatrix(p + "attn_v.weight", kv_dim, H));
    RADIX_ASSIGN_OR_RETURN(layer.o, w.RequireMatrix(p + "attn_output.weight", H, q_dim));
    RADIX_ASSIGN_OR_RETURN(layer.gate, w.RequireMatrix(p + "ffn_gate.weight", I, H));
    RADIX_ASSIGN_OR_RETURN(layer.up, w.RequireMatrix(p + "ffn_up.weight", I, H));
    RADIX_ASSIGN_OR_RETURN(layer.down, w.RequireMatrix(p + "ffn_down.weight", H, I));
  }
  return Status::Ok();
}

Status Gemma3Model::Forward(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool,
                            float* logits) const {
  const ModelConfig& c = config_;
  const kernels::KernelTable& kt = kernels::ActiveKernels();
  RADIX_CHECK(static_cast<int64_t>(kv.k.size()) == c.num_layers &&
              static_cast<int64_t>(kv.v.size()) == c.num_layers);
  RADIX_CHECK(kv.num_kv_heads == c.num_kv_heads && kv.head_dim == c.head_dim);
  const BatchLayout layout = BatchLayout::Build(batch, kv.num_slots);
  const kernels::ActivationMode act = weights_->activation_mode();
  for (int32_t id : batch.token_ids) {
    if (id < 0 || id >= c.vocab_size) {
      return InvalidArgument("token id " + std::to_string(id) + " is out of range [0, " +
                             std::to_string(c.vocab_size) + ")");
    }
  }
  const int64_t T = batch.num_tokens(), H = c.hidden_size, D = c.head_dim;
  const int64_t q_dim = c.num_heads * D, kv_dim = c.num_kv_heads * D, I = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float off = norm_offset_;
  std::vector<float> x(static_cast<size_t>(T * H)), h(x.size());
  std::vector<float> q(static_cast<size_t>(T * q_dim)), k(static_cast<size_t>(T * kv_dim)),
      v(k.size());
  std::vector<float> attn(q.size()), gate(static_cast<size_t>(T * I)), up(gate.size());
  const float embed_scale = std::sqrt(static_cast<float>(H));
  for (int64_t t = 0; t < T; ++t) {
    kernels::DequantizeRow(embedding_, batch.token_ids[static_cast<size_t>(t)], x.data() + t * H);
    for (int64_t i = 0; i < H; ++i) x[static_cast<size_t>(t * H + i)] *= embed_scale;
  }
  const double scalar =
      c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : static_cast<double>(D);
  const kernels::AttentionShape shape{
      static_cast<int>(c.num_heads), static_cast<int>(c.num_kv_heads), static_cast<int>(D),
      static_cast<float>(1.0 / std::sqrt(scalar)), static_cast<float>(c.attn_logit_softcapping)};
  auto norm_rows = [&](const float* in, const std::vector<float>& w, float* out, int64_t rows,
                       int64_t width) {
    for (int64_t r = 0; r < rows; ++r)
      kt.rms_norm(in + r * width, w.data(), off, eps, out + r * width, width);
  };
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const Layer& layer = layers_[static_cast<size_t>(l)];
    norm_rows(x.data(), layer.attn_norm, h.data(), T, H);
    kernels::MatMul(kt, pool, h.data(), T, layer.q, q.data(), act);
    kernels::MatMul(kt, pool, h.data(), T, layer.k, k.data(), act);
    kernels::MatMul(kt, pool, h.data(), T, layer.v, v.data(), act);
    norm_rows(q.data(), layer.q_norm, q.data(), T * c.num_heads, D);
    norm_rows(k.data(), layer.k_norm, k.data(), T * c.num_kv_heads, D);
    const std::vector<float>& inv_freq = layer.sliding ? inv_freq_local_ : inv_freq_global_;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t pos = batch.positions[static_cast<size_t>(t)];
      kernels::ApplyRope(q.data() + t * q_dim, static_cast<int>(c.num_heads), static_cast<int>(D),
                         static_cast<int>(c.rotary_dim), pos, inv_freq,
                         kernels::RopeLayout::kRotateHalf);
      kernels::ApplyRope(k.data() + t * kv_dim, static_cast<int>(c.num_kv_heads),
                         static_cast<int>(D), static_cast<int>(c.rotary_dim), pos, inv_freq,
                         kernels::RopeLayout::kRotateHalf);
    }
    PagedAttention(kt, pool, batch, layout, shape, layer.sliding ? c.sliding_window : 0, q.data(),
                   k.data(), v.data(), kv.k[static_cast<size_t>(l)], kv.v[static_cast<size_t>(l)],
                   attn.data());
    kernels::MatMul(kt, pool, attn.data(), T, layer.o, h.data(), act);
    norm_rows(h.data(), layer.post_attn_norm, h.data(), T, H);
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];

    norm_rows(x.data(), layer.ffn_norm, h.data(), T, H);
    kernels::MatMul(kt, pool, h.data(), T, layer.gate, gate.data(), act);
    kernels::MatMul(kt, pool, h.data(), T, layer.up, up.data(), act);
    kt.gelu_tanh_mul(gate.data(), up.data(), gate.data(), T * I);
    kernels::MatMul(kt, pool, gate.data(), T, layer.down, h.data(), act);
    norm_rows(h.data(), layer.post_ffn_norm, h.data(), T, H);
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];
  }
  const int64_t n_out = static_cast<int64_t>(batch.logit_indices.size());
  std::vector<float> final_rows(static_cast<size_t>(n_out * H));
  for (int64_t r = 0; r < n_out; ++r) {
    kt.rms_norm(x.data() + batch.logit_indices[static_cast<size_t>(r)] * H, output_norm_.data(),
                off, eps, final_rows.data() + r * H, H);
  }
  kernels::MatMul(kt, pool, final_rows.data(), n_out, embedding_, logits, act);
  if (c.final_logit_softcapping > 0) {
    const float cap = static_cast<float>(c.final_logit_softcapping);
    for (int64_t i = 0; i < n_out * c.vocab_size; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
  }
  return Status::Ok();
}

}  // namespace radixserve::model

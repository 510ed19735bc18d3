#include "model/llama_model.h"

#include <cmath>

#include "model/assign_or_return.h"
#include "model/paged_attention.h"

namespace radixserve::model {
namespace {

void AddBias(float* x, const std::vector<float>& bias, int64_t rows) {
  const int64_t width = static_cast<int64_t>(bias.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < width; ++i) x[r * width + i] += bias[static_cast<size_t>(i)];
  }
}

}  // namespace

Expected<std::unique_ptr<CausalLM>> LlamaModel::Create(ModelConfig config,
                                                       std::unique_ptr<WeightStore> weights,
                                                       LlamaVariant variant) {
  std::unique_ptr<LlamaModel> model(new LlamaModel(std::move(config), std::move(weights), variant));
  RADIX_RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<CausalLM>(std::move(model));
}

Status LlamaModel::Load() {
  const ModelConfig& c = config_;
  if (c.hidden_act != "silu") {
    return Unsupported(config_.architecture + ": hidden_act '" + c.hidden_act +
                       "' is not supported");
  }
  WeightStore& w = *weights_;
  rope_layout_ = w.rope_layout();
  const float* freq_factors = nullptr;
  std::vector<float> factors;
  if (w.Find("rope_freqs.weight") != nullptr) {
    RADIX_ASSIGN_OR_RETURN(factors, w.RequireVector("rope_freqs.weight", c.rotary_dim / 2));
    freq_factors = factors.data();
  }
  inv_freq_ = kernels::RopeInvFreq(c.rope_theta, static_cast<int>(c.rotary_dim), c.rope_scaling,
                                   freq_factors);
  const int64_t H = c.hidden_size, q_dim = c.num_heads * c.head_dim,
                kv_dim = c.num_kv_heads * c.head_dim;
  RADIX_ASSIGN_OR_RETURN(embedding_, w.RequireMatrix("token_embd.weight", c.vocab_size, H));
  RADIX_ASSIGN_OR_RETURN(output_norm_, w.RequireVector("output_norm.weight", H));
  if (c.tie_word_embeddings && w.Find("output.weight") == nullptr) {
    lm_head_ = embedding_;
  } else {
    RADIX_ASSIGN_OR_RETURN(lm_head_, w.RequireMatrix("output.weight", c.vocab_size, H));
  }
  layers_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    Layer& layer = layers_[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    RADIX_ASSIGN_OR_RETURN(layer.attn_norm, w.RequireVector(p + "attn_norm.weight", H));
    RADIX_ASSIGN_OR_RETURN(layer.ffn_norm, w.RequireVector(p + "ffn_norm.weight", H));
    RADIX_ASSIGN_OR_RETURN(layer.q, w.RequireMatrix(p + "attn_q.weight", q_dim, H));
    RADIX_ASSIGN_OR_RETURN(layer.k, w.RequireMatrix(p + "attn_k.weight", kv_dim, H));
    RADIX_ASSIGN_OR_RETURN(layer.v, w.RequireMatrix(p + "attn_v.weight", kv_dim, H));
    RADIX_ASSIGN_OR_RETURN(layer.o, w.RequireMatrix(p + "attn_output.weight", H, q_dim));
    RADIX_ASSIGN_OR_RETURN(layer.gate,
                           w.RequireMatrix(p + "ffn_gate.weight", c.intermediate_size, H));
    RADIX_ASSIGN_OR_RETURN(layer.up, w.RequireMatrix(p + "ffn_up.weight", c.intermediate_size, H));
    RADIX_ASSIGN_OR_RETURN(layer.down,
                           w.RequireMatrix(p + "ffn_down.weight", H, c.intermediate_size));
    if (variant_.qkv_bias) {
      RADIX_ASSIGN_OR_RETURN(layer.q_bias, w.RequireVector(p + "attn_q.bias", q_dim));
      RADIX_ASSIGN_OR_RETURN(layer.k_bias, w.RequireVector(p + "attn_k.bias", kv_dim));
      RADIX_ASSIGN_OR_RETURN(layer.v_bias, w.RequireVector(p + "attn_v.bias", kv_dim));
    }
    if (variant_.qk_norm) {
      RADIX_ASSIGN_OR_RETURN(layer.q_norm, w.RequireVector(p + "attn_q_norm.weight", c.head_dim));
      RADIX_ASSIGN_OR_RETURN(layer.k_norm, w.RequireVector(p + "attn_k_norm.weight", c.head_dim));
    }
  }
  return Status::Ok();
}

Status LlamaModel::Forward(const ForwardBatch& batch, const KvCacheView& kv, ThreadPool* pool,
                           float* logits) const {
  const ModelConfig& c = config_;
  const kernels::KernelTable& kt = kernels::ActiveKernels();
  RADIX_CHECK(static_cast<int64_t>(kv.k.size()) == c.num_layers &&
              static_cast<int64_t>(kv.v.size()) == c.num_layers);
  RADIX_CHECK(kv.num_kv_heads == c.num_kv_heads && kv.head_dim == c.head_dim);
  const BatchLayout layout = BatchLayout::Build(batch, kv.num_slots);
  const kernels::ActivationMode act = weights_->activation_mode();
  const int64_t T = batch.num_tokens();
  for (int32_t id : batch.token_ids) {
    if (id < 0 || id >= c.vocab_size) {
      return InvalidArgument("token id " + std::to_string(id) + " is out of range [0, " +
                             std::to_string(c.vocab_size) + ")");
    }
  }
  const int64_t H = c.hidden_size, D = c.head_dim;
  const int64_t q_dim = c.num_heads * D, kv_dim = c.num_kv_heads * D, I = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> x(static_cast<size_t>(T * H)), h(x.size());
  std::vector<float> q(static_cast<size_t>(T * q_dim)), k(static_cast<size_t>(T * kv_dim)),
      v(k.size());
  std::vector<float> attn(q.size()), gate(static_cast<size_t>(T * I)), up(gate.size());
  for (int64_t t = 0; t < T; ++t)
    kernels::DequantizeRow(embedding_, batch.token_ids[static_cast<size_t>(t)], x.data() + t * H);

  const kernels::AttentionShape shape{static_cast<int>(c.num_heads),
                                      static_cast<int>(c.num_kv_heads), static_cast<int>(D),
                                      1.0f / std::sqrt(static_cast<float>(D)), 0.0f};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const Layer& layer = layers_[static_cast<size_t>(l)];
    for (int64_t t = 0; t < T; ++t)
      kt.rms_norm(x.data() + t * H, layer.attn_norm.data(), 0.0f, eps, h.data() + t * H, H);
    kernels::MatMul(kt, pool, h.data(), T, layer.q, q.data(), act);
    kernels::MatMul(kt, pool, h.data(), T, layer.k, k.data(), act);
    kernels::MatMul(kt, pool, h.data(), T, layer.v, v.data(), act);
    if (variant_.qkv_bias) {
      AddBias(q.data(), layer.q_bias, T);
      AddBias(k.data(), layer.k_bias, T);
      AddBias(v.data(), layer.v_bias, T);
    }
    if (variant_.qk_norm) {
      for (int64_t r = 0; r < T * c.num_heads; ++r)
        kt.rms_norm(q.data() + r * D, layer.q_norm.data(), 0.0f, eps, q.data() + r * D, D);
      for (int64_t r = 0; r < T * c.num_kv_heads; ++r)
        kt.rms_norm(k.data() + r * D, layer.k_norm.data(), 0.0f, eps, k.data() + r * D, D);
    }
    for (int64_t t = 0; t < T; ++t) {
      const int64_t pos = batch.positions[static_cast<size_t>(t)];
      kernels::ApplyRope(q.data() + t * q_dim, static_cast<int>(c.num_heads), static_cast<int>(D),
                         static_cast<int>(c.rotary_dim), pos, inv_freq_, rope_layout_);
      kernels::ApplyRope(k.data() + t * kv_dim, static_cast<int>(c.num_kv_heads),
                         static_cast<int>(D), static_cast<int>(c.rotary_dim), pos, inv_freq_,
                         rope_layout_);
    }
    PagedAttention(kt, pool, batch, layout, shape, 0, q.data(), k.data(), v.data(),
                   kv.k[static_cast<size_t>(l)], kv.v[static_cast<size_t>(l)], attn.data());
    kernels::MatMul(kt, pool, attn.data(), T, layer.o, h.data(), act);
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];

    for (int64_t t = 0; t < T; ++t)
      kt.rms_norm(x.data() + t * H, layer.ffn_norm.data(), 0.0f, eps, h.data() + t * H, H);
    kernels::MatMul(kt, pool, h.data(), T, layer.gate, gate.data(), act);
    kernels::MatMul(kt, pool, h.data(), T, layer.up, up.data(), act);
    kt.silu_mul(gate.data(), up.data(), gate.data(), T * I);
    kernels::MatMul(kt, pool, gate.data(), T, layer.down, h.data(), act);
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];
  }

  const int64_t n_out = static_cast<int64_t>(batch.logit_indices.size());
  std::vector<float> final_rows(static_cast<size_t>(n_out * H));
  for (int64_t r = 0; r < n_out; ++r) {
    kt.rms_norm(x.data() + batch.logit_indices[static_cast<size_t>(r)] * H, output_norm_.data(),
                0.0f, eps, final_rows.data() + r * H, H);
  }
  kernels::MatMul(kt, pool, final_rows.data(), n_out, lm_head_, logits, act);
  return Status::Ok();
}

}  // namespace radixserve::model

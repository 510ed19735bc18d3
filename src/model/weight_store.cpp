#include "model/weight_store.h"

#include <cstring>
#include <vector>

#include "kernels/half.h"
#include "kernels/ref/dequantize.h"
#include "model/gpt_oss_experts.h"

namespace radixserve::model {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// `values` stored as `format` (kF32, kF16 or kBF16; 16-bit formats rounded to nearest even).
std::vector<uint8_t> EncodeFloats(kernels::WeightFormat format, const std::vector<float>& values) {
  const auto elements = static_cast<int64_t>(values.size());
  std::vector<uint8_t> bytes(static_cast<size_t>(*kernels::StorageBytes(format, elements)));
  if (format == kernels::WeightFormat::kF32) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }
  for (int64_t i = 0; i < elements; ++i) {
    const float v = values[static_cast<size_t>(i)];
    const uint16_t h =
        format == kernels::WeightFormat::kF16 ? kernels::F32ToF16(v) : kernels::F32ToBf16(v);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
  return bytes;
}

}  // namespace

std::string CanonicalWeightName(const std::string& hf, const std::string& model_type) {
  if (model_type == "bert") {
    // BERT keeps its HF names (there is no GGUF scheme for it here), without the "bert." prefix
    // that task-head checkpoints add. position_ids is an index buffer, not a weight.
    const std::string name = hf.rfind("bert.", 0) == 0 ? hf.substr(5) : hf;
    if (name == "embeddings.position_ids") return "";
    if (name.rfind("embeddings.", 0) == 0 || name.rfind("encoder.", 0) == 0) return name;
    // BertForSequenceClassification's head (cross-encoders): the pooler and the classifier.
    if (name.rfind("pooler.", 0) == 0 || name.rfind("classifier.", 0) == 0) return name;
    return "";
  }
  if (model_type == "roberta" || model_type == "xlm-roberta") {
    // (XLM-)RoBERTa: BERT's names under "roberta." in task-head checkpoints. The sequence
    // classifier's head (dense + tanh, out_proj) is BERT's pooler + classifier in other names;
    // the base model's own pooler is not used.
    const std::string name = hf.rfind("roberta.", 0) == 0 ? hf.substr(8) : hf;
    if (name == "embeddings.position_ids") return "";
    if (name.rfind("embeddings.", 0) == 0 || name.rfind("encoder.", 0) == 0) return name;
    if (name.rfind("classifier.dense.", 0) == 0) return "pooler.dense." + name.substr(17);
    if (name.rfind("classifier.out_proj.", 0) == 0) return "classifier." + name.substr(20);
    return "";
  }
  // *ForSequenceClassification's head (a classifier or a reward model).
  if (hf == "score.weight") return "cls_score.weight";
  if (hf == "score.bias") return "cls_score.bias";
  // Headless checkpoints (Qwen3Model, LlamaModel, as sentence-transformers saves an embedder) name
  // the decoder's tensors without the "model." prefix.
  if (hf.rfind("layers.", 0) == 0 || hf == "embed_tokens.weight" || hf == "norm.weight") {
    return CanonicalWeightName("model." + hf, model_type);
  }
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return "";
  const size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
  if (layer.empty() || layer.find_first_not_of("0123456789") != std::string::npos) return "";
  const std::string rest = hf.substr(dot + 1);
  if (model_type == "gpt_oss") {
    // The sinks are a bare parameter; the experts' stacked (and transposed, or MXFP4-packed)
    // tensors become the canonical ones through ConvertGptOssExperts.
    if (rest == "self_attn.sinks") return "blk." + layer + ".attn_sinks.weight";
    if (rest == "mlp.router.weight") return "blk." + layer + ".ffn_gate_inp.weight";
    if (rest == "mlp.router.bias") return "blk." + layer + ".ffn_gate_inp.bias";
    if (rest.rfind("mlp.experts.", 0) == 0) return "";
  }
  // DeepSeek's router correction bias is a bare parameter of the gate.
  if (rest == "mlp.gate.e_score_correction_bias") return "blk." + layer + ".exp_probs_b.bias";
  const bool gemma = model_type.rfind("gemma", 0) == 0;
  static const std::pair<const char*, const char*> kCommon[] = {
      {"input_layernorm", "attn_norm"},
      {"self_attn.q_proj", "attn_q"},
      {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"},
      {"self_attn.qkv_proj", "attn_qkv"},  // Phi-3: Q, K, V stacked
      {"mlp.gate_up_proj", "ffn_up"},      // Phi-3: [gate; up] stacked
      {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"},
      {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},
      {"pre_feedforward_layernorm", "ffn_norm"},
      {"post_feedforward_layernorm", "post_ffw_norm"},
      {"mlp.gate", "ffn_gate_inp"},                       // MoE router
      {"block_sparse_moe.gate", "ffn_gate_inp"},          // Mixtral's router
      {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"},  // Qwen2-MoE's shared expert
      {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
      {"mlp.shared_expert.down_proj", "ffn_down_shexp"},
      {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"},
      {"mlp.shared_experts.gate_proj", "ffn_gate_shexp"},  // DeepSeek's shared experts
      {"mlp.shared_experts.up_proj", "ffn_up_shexp"},
      {"mlp.shared_experts.down_proj", "ffn_down_shexp"},
      {"self_attn.q_a_proj", "attn_q_a"},  // DeepSeek's multi-head latent attention
      {"self_attn.q_a_layernorm", "attn_q_a_norm"},
      {"self_attn.q_b_proj", "attn_q_b"},
      {"self_attn.kv_a_proj_with_mqa", "attn_kv_a_mqa"},
      {"self_attn.kv_a_layernorm", "attn_kv_a_norm"},
      {"self_attn.kv_b_proj", "attn_kv_b"},
      // DeepSeek-V3's multi-token-prediction block (the layer after the main ones).
      {"enorm", "nextn.enorm"},
      {"hnorm", "nextn.hnorm"},
      {"eh_proj", "nextn.eh_proj"},
      {"embed_tokens", "nextn.embed_tokens"},
      {"shared_head.norm", "nextn.shared_head_norm"},
      {"shared_head.head", "nextn.shared_head_head"},
  };
  for (const std::string suffix : {".weight", ".bias"}) {
    if (rest.size() <= suffix.size() ||
        rest.compare(rest.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string module = rest.substr(0, rest.size() - suffix.size());
    std::string mapped;
    for (auto [from, to] : kCommon) {
      if (module == from) mapped = to;
    }
    // Gemma and OLMo 2 norm the attention's output with it; Llama-style models the MLP's input.
    if (module == "post_attention_layernorm") {
      mapped = gemma || model_type == "olmo2" || model_type == "gpt_oss" ? "post_attention_norm"
                                                                         : "ffn_norm";
    }
    // MoE experts: mlp.experts.E.gate_proj -> ffn_gate_exps.E (see RequireExperts); Mixtral's
    // block_sparse_moe.experts.E.w1 / w3 / w2 are gate / up / down.
    std::string experts = "mlp.experts.";
    if (module.rfind("block_sparse_moe.experts.", 0) == 0) experts = "block_sparse_moe.experts.";
    if (module.rfind(experts, 0) == 0) {
      const size_t e_dot = module.find('.', experts.size());
      if (e_dot == std::string::npos) return "";
      const std::string e = module.substr(experts.size(), e_dot - experts.size());
      if (e.empty() || e.find_first_not_of("0123456789") != std::string::npos) return "";
      const std::string proj = module.substr(e_dot + 1);
      const bool mixtral = experts[0] == 'b';
      const char* kind = proj == (mixtral ? "w1" : "gate_proj")   ? "ffn_gate_exps"
                         : proj == (mixtral ? "w3" : "up_proj")   ? "ffn_up_exps"
                         : proj == (mixtral ? "w2" : "down_proj") ? "ffn_down_exps"
                                                                  : nullptr;
      if (kind == nullptr) return "";
      return "blk." + layer + "." + kind + "." + e + suffix;
    }
    if (mapped.empty()) return "";
    return "blk." + layer + "." + mapped + suffix;
  }
  return "";
}

void WeightStore::Add(WeightTensor tensor) {
  std::string name = tensor.name;
  tensors_[name] = std::move(tensor);
}

Expected<std::unique_ptr<WeightStore>> WeightStore::FromGguf(GgufFile gguf) {
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->gguf_ = std::make_unique<GgufFile>(std::move(gguf));
  store->description_ = store->gguf_->path();
  auto arch = store->gguf_->GetString("general.architecture");
  // llama.cpp's converter stores Q/K rows in Meta's interleaved order for every architecture it
  // runs with "normal" (non-NEOX) rotary embeddings.
  if (arch.ok() && arch.value() &&
      (*arch.value() == "llama" || *arch.value() == "granite" || *arch.value() == "smollm3")) {
    store->rope_layout_ = kernels::RopeLayout::kInterleaved;
  }
  for (const GgufTensorInfo& t : store->gguf_->tensors()) {
    store->Add({t.name, store->gguf_->path(), t.format, t.shape, t.data, t.bytes});
  }
  return store;
}

Expected<std::unique_ptr<WeightStore>> WeightStore::FromSafetensors(
    std::vector<SafetensorsFile> files, const std::string& model_type) {
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->safetensors_ = std::move(files);
  for (const SafetensorsFile& f : store->safetensors_) {
    if (!store->description_.empty()) store->description_ += ", ";
    store->description_ += f.path();
    for (const auto& [hf_name, dtype] : f.other_dtypes()) {
      if (!CanonicalWeightName(hf_name, model_type).empty()) {
        return Unsupported(f.path() + ": tensor " + hf_name + " has dtype " + dtype +
                           "; radixserve loads F32, F16 and BF16 weights");
      }
    }
    for (const SafetensorsTensor& t : f.tensors()) {
      const std::string name = CanonicalWeightName(t.name, model_type);
      if (name.empty()) continue;
      if (store->tensors_.count(name) != 0) {
        return DataLoss(f.path() + ": tensor " + t.name + " appears in more than one file");
      }
      store->Add({name, f.path() + " (" + t.name + ")", t.format, t.shape, t.data, t.bytes});
    }
  }
  if (model_type == "gpt_oss") {
    RADIX_ASSIGN_OR_RETURN(std::vector<ConvertedTensor> experts,
                           ConvertGptOssExperts(store->safetensors_));
    for (ConvertedTensor& t : experts) {
      auto& bytes = store->owned_.emplace_back(std::move(t.bytes));
      store->Add(
          {t.name, t.file, t.format, t.shape, bytes.data(), static_cast<int64_t>(bytes.size())});
    }
  }
  return store;
}

std::unique_ptr<WeightStore> WeightStore::Dummy(uint64_t seed, kernels::WeightFormat format) {
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->dummy_ = true;
  store->dummy_format_ = format;
  store->rng_.seed(seed);
  store->description_ = "dummy weights (seed " + std::to_string(seed) + ")";
  return store;
}

const WeightTensor* WeightStore::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Expected<WeightTensor> WeightStore::Require(const std::string& name,
                                            const std::vector<int64_t>& shape) {
  if (dummy_ && tensors_.count(name) == 0) {
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    const bool is_norm = name.find("norm") != std::string::npos;
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<float> values(static_cast<size_t>(elements));
    for (float& v : values) v = (is_norm ? 1.0f : 0.0f) + dist(rng_);
    const auto format = shape.size() == 1 ? kernels::WeightFormat::kF32 : dummy_format_;
    auto& bytes = owned_.emplace_back(EncodeFloats(format, values));
    Add({name, description_, format, shape, bytes.data(), static_cast<int64_t>(bytes.size())});
  }
  const WeightTensor* t = Find(name);
  if (t == nullptr) return NotFound(description_ + ": missing tensor " + name);
  if (t->shape != shape) {
    return InvalidArgument(t->file + ": tensor " + name + " has shape " + ShapeString(t->shape) +
                           ", expected " + ShapeString(shape));
  }
  if (!counted_[name]) {
    counted_[name] = true;
    used_bytes_ += t->bytes;
    if (progress_ != nullptr) progress_->Update(static_cast<int64_t>(counted_.size()));
  }
  return *t;
}

uint64_t WeightStore::DropSourcePages(const kernels::WeightMatrix& m) const {
  const auto bytes = static_cast<uint64_t>(m.rows * m.row_bytes());
  uint64_t dropped = gguf_ != nullptr ? gguf_->file().DropPages(m.data, bytes) : 0;
  for (const SafetensorsFile& file : safetensors_) dropped += file.file().DropPages(m.data, bytes);
  return dropped;
}

Expected<kernels::WeightMatrix> WeightStore::RequireMatrix(const std::string& name, int64_t rows,
                                                           int64_t cols) {
  RADIX_ASSIGN_OR_RETURN(auto t, Require(name, {rows, cols}));
  return StoredMatrix(name, t, rows, cols);
}

Expected<kernels::WeightMatrix> WeightStore::StoredMatrix(const std::string& name,
                                                          const WeightTensor& t, int64_t rows,
                                                          int64_t cols) {
  const kernels::WeightMatrix stored{t.format, rows, cols, t.data};
  if (!matrix_storage_ || dummy_) return stored;
  if (auto it = converted_.find(name); it != converted_.end()) return it->second;
  const bool is_float = t.format == kernels::WeightFormat::kF32 ||
                        t.format == kernels::WeightFormat::kF16 ||
                        t.format == kernels::WeightFormat::kBF16;
  if (!is_float) {
    if (!counted_quantized_[name]) {
      counted_quantized_[name] = true;
      ++kept_quantized_;
    }
    return stored;
  }
  if (t.format == *matrix_storage_) return stored;
  const int64_t elements = rows * cols;
  std::vector<float> values(static_cast<size_t>(elements));
  kernels::ref::Dequantize(t.format, t.data, values.data(), elements);
  auto& bytes = owned_.emplace_back(EncodeFloats(*matrix_storage_, values));
  used_bytes_ += static_cast<int64_t>(bytes.size()) - t.bytes;
  const kernels::WeightMatrix converted{*matrix_storage_, rows, cols, bytes.data()};
  converted_.emplace(name, converted);
  ++converted_count_;
  return converted;
}

Expected<std::vector<kernels::WeightMatrix>> WeightStore::RequireExperts(const std::string& base,
                                                                         int64_t count,
                                                                         int64_t rows,
                                                                         int64_t cols) {
  std::vector<kernels::WeightMatrix> experts;
  experts.reserve(static_cast<size_t>(count));
  if (Find(base + ".weight") != nullptr) {
    // The stacked tensor, through RequireMatrix as one [count * rows, cols] matrix (conversion
    // under set_matrix_storage included), after checking its 3-D shape.
    const std::string name = base + ".weight";
    RADIX_ASSIGN_OR_RETURN(auto t, Require(name, {count, rows, cols}));
    const int64_t converted_before = converted_count_, kept_before = kept_quantized_;
    RADIX_ASSIGN_OR_RETURN(auto all, StoredMatrix(name, t, count * rows, cols));
    if (converted_count_ != converted_before) converted_count_ += count - 1;
    if (kept_quantized_ != kept_before) kept_quantized_ += count - 1;
    for (int64_t e = 0; e < count; ++e) {
      kernels::WeightMatrix m{all.format, rows, cols, nullptr};
      m.data = static_cast<const uint8_t*>(all.data) + e * rows * m.row_bytes();
      experts.push_back(m);
    }
    return experts;
  }
  for (int64_t e = 0; e < count; ++e) {
    RADIX_ASSIGN_OR_RETURN(auto m,
                           RequireMatrix(base + "." + std::to_string(e) + ".weight", rows, cols));
    experts.push_back(m);
  }
  return experts;
}

Expected<std::vector<float>> WeightStore::RequireVector(const std::string& name, int64_t size) {
  RADIX_ASSIGN_OR_RETURN(auto t, Require(name, {size}));
  std::vector<float> out(static_cast<size_t>(size));
  if (size % kernels::BlockElements(t.format) != 0) {
    return InvalidArgument(t.file + ": tensor " + name +
                           " has a size that does not fit its format");
  }
  kernels::ref::Dequantize(t.format, t.data, out.data(), size);
  return out;
}

}  // namespace radixserve::model

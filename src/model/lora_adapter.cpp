#include "model/lora_adapter.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "kernels/half.h"
#include "kernels/matmul.h"
#include "model/gguf_file.h"
#include "model/safetensors_file.h"
#include "tokenizer/regex.h"

namespace radixserve::model {
namespace {

namespace fs = std::filesystem;

constexpr std::array<const char*, kLoraTargetCount> kHfNames = {
    "q_proj",   "k_proj",    "v_proj",   "o_proj",   "gate_proj",
    "up_proj",  "down_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa",
    "kv_b_proj"};
constexpr std::array<const char*, kLoraTargetCount> kGgufNames = {
    "attn_q",   "attn_k",   "attn_v",   "attn_output",   "ffn_gate", "ffn_up",
    "ffn_down", "attn_q_a", "attn_q_b", "attn_kv_a_mqa", "attn_kv_b"};

std::optional<LoraTarget> TargetFromGgufName(const std::string& name) {
  for (int t = 0; t < kLoraTargetCount; ++t) {
    if (name == kGgufNames[static_cast<size_t>(t)]) return static_cast<LoraTarget>(t);
  }
  return std::nullopt;
}

// A matrix in any stored format, as float32 [rows, cols].
std::vector<float> ToFloat(const kernels::WeightMatrix& m) {
  std::vector<float> out(static_cast<size_t>(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r) kernels::DequantizeRow(m, r, out.data() + r * m.cols);
  return out;
}
std::vector<float> ToFloat(kernels::WeightFormat format, int64_t rows, int64_t cols,
                           const void* data) {
  return ToFloat(kernels::WeightMatrix{format, rows, cols, data});
}

// Expert e's pair out of A stacked per expert ([experts x rank, in]): its A rows as float32 and
// the pair's shape and scale; B is the caller's to place.
LoraWeights StackedExpertA(const kernels::WeightMatrix& stacked_a, int64_t e, int64_t rank,
                           int64_t out, float scale) {
  LoraWeights w;
  w.rank = rank;
  w.in = stacked_a.cols;
  w.out = out;
  w.scale = scale;
  w.a = ToFloat(stacked_a.Rows(e * rank, rank));
  return w;
}

// How a matrix pair is kept: 16-bit when the file holds both in the same 16-bit format.
kernels::WeightFormat StoredFormat(kernels::WeightFormat a, kernels::WeightFormat b) {
  const bool half = a == kernels::WeightFormat::kF16 || a == kernels::WeightFormat::kBF16;
  return half && a == b ? a : kernels::WeightFormat::kF32;
}

// Parses "<layer>" followed by ".<rest>"; nullopt when `s` does not start with a number.
std::optional<std::pair<int64_t, std::string>> SplitLayer(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  if (i == 0 || i > 9 || i >= s.size() || s[i] != '.') return std::nullopt;
  return std::make_pair(std::stoll(s.substr(0, i)), s.substr(i + 1));
}

// Rows of a Q or K projection's B reordered between HF's rotate-half order (each head's first
// half, then its second half) and llama.cpp's interleaved order (pairs).
std::vector<float> PermuteHeads(const std::vector<float>& b, int64_t heads, int64_t head_dim,
                                int64_t rank, bool to_interleaved) {
  std::vector<float> out(b.size());
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t interleaved = h * head_dim + 2 * i + j;
        const int64_t rotate_half = h * head_dim + j * half + i;
        const int64_t dst = to_interleaved ? interleaved : rotate_half;
        const int64_t src = to_interleaved ? rotate_half : interleaved;
        std::copy_n(b.begin() + src * rank, rank, out.begin() + dst * rank);
      }
    }
  }
  return out;
}

}  // namespace

const char* LoraTargetName(LoraTarget target) { return kHfNames[static_cast<size_t>(target)]; }

std::optional<LoraTarget> LoraTargetFromName(const std::string& name) {
  for (int t = 0; t < kLoraTargetCount; ++t) {
    if (name == kHfNames[static_cast<size_t>(t)]) return static_cast<LoraTarget>(t);
  }
  return std::nullopt;
}

Expected<std::shared_ptr<const LoraAdapter>> LoraAdapter::Load(const std::string& path,
                                                               const ModelConfig& config,
                                                               const LoraLoadOptions& options) {
  std::shared_ptr<LoraAdapter> adapter(new LoraAdapter());
  adapter->layers_.resize(static_cast<size_t>(config.num_layers));
  adapter->experts_.resize(static_cast<size_t>(config.num_layers));
  adapter->shared_.resize(static_cast<size_t>(config.num_layers));
  std::error_code ec;
  fs::path p(path);
  if (fs::is_regular_file(p, ec) && p.extension() == ".gguf") {
    RADIX_RETURN_IF_ERROR(adapter->LoadGguf(path, config, options));
  } else {
    if (fs::is_regular_file(p, ec) && p.filename() == "adapter_config.json") p = p.parent_path();
    if (!fs::is_directory(p, ec)) {
      return NotFound("LoRA adapter '" + path +
                      "' is neither a PEFT folder (adapter_config.json + "
                      "adapter_model.safetensors) nor a .gguf LoRA file");
    }
    RADIX_RETURN_IF_ERROR(adapter->LoadPeft(p.string(), config, options));
  }
  if (adapter->targets_.empty()) {
    return InvalidArgument("LoRA adapter '" + path + "' holds no LoRA matrices");
  }
  std::sort(adapter->targets_.begin(), adapter->targets_.end());
  return std::shared_ptr<const LoraAdapter>(std::move(adapter));
}

Status LoraAdapter::LoadPeft(const std::string& dir, const ModelConfig& config,
                             const LoraLoadOptions& options) {
  format_ = "peft";
  const std::string config_path = (fs::path(dir) / "adapter_config.json").string();
  std::ifstream in(config_path);
  if (!in) return NotFound(config_path + ": no such file (a PEFT adapter folder needs it)");
  // Ordered: rank_pattern / alpha_pattern entries are tried in the file's order, as PEFT does.
  nlohmann::ordered_json cfg =
      nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!cfg.is_object()) return InvalidArgument(config_path + ": not a JSON object");
  const auto refuse = [&](const std::string& why) {
    return InvalidArgument(config_path + ": " + why);
  };
  const auto truthy = [&](const char* key) {
    auto it = cfg.find(key);
    return it != cfg.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>()) &&
           !((it->is_array() || it->is_object()) && it->empty()) &&
           !(it->is_string() &&
             (it->get<std::string>() == "none" || it->get<std::string>().empty()));
  };
  if (cfg.contains("peft_type") && cfg["peft_type"] != "LORA") {
    return refuse("peft_type " + cfg["peft_type"].dump() + " is not LORA");
  }
  if (truthy("modules_to_save")) {
    return refuse(
        "modules_to_save (fully trained extra modules) is not supported; only LoRA "
        "matrices on q/k/v/o/gate/up/down projections are");
  }
  if (truthy("use_dora")) return refuse("DoRA adapters (use_dora) are not supported");
  if (truthy("bias"))
    return refuse("adapters that train biases (bias != \"none\") are not supported");
  if (truthy("lora_bias")) return refuse("lora_bias is not supported");
  if (truthy("fan_in_fan_out")) return refuse("fan_in_fan_out adapters are not supported");
  if (!cfg.contains("r") || !cfg["r"].is_number_integer() || cfg["r"].get<int64_t>() <= 0) {
    return refuse("\"r\" must be a positive integer");
  }
  const int64_t r = cfg["r"].get<int64_t>();
  double alpha = static_cast<double>(r);
  if (cfg.contains("lora_alpha")) {
    if (!cfg["lora_alpha"].is_number()) return refuse("\"lora_alpha\" must be a number");
    alpha = cfg["lora_alpha"].get<double>();
  }
  const bool rslora = cfg.value("use_rslora", false);
  // rank_pattern / alpha_pattern: the first entry whose pattern matches the end of a module's
  // name after a dot (PEFT's get_pattern_key: re.match(rf"(.*\.)?({key})$", name)).
  struct Pattern {
    tokenizer::Regex re;  // PCRE2, as Python's re reads the pattern; its match limit bounds time
    double value;
  };
  std::vector<Pattern> rank_pattern, alpha_pattern;
  for (const auto& [field, to] :
       {std::pair{"rank_pattern", &rank_pattern}, std::pair{"alpha_pattern", &alpha_pattern}}) {
    if (!truthy(field)) continue;
    if (!cfg[field].is_object()) return refuse(std::string("\"") + field + "\" must be an object");
    for (const auto& [key, value] : cfg[field].items()) {
      const bool integral = std::string(field) == "rank_pattern";
      if (!(integral ? value.is_number_integer() : value.is_number()) || value.get<double>() <= 0) {
        return refuse(std::string(field) + " entry \"" + key + "\" must be a positive " +
                      (integral ? "integer" : "number"));
      }
      auto re = tokenizer::Regex::Compile("\\A(?:.*\\.)?(?:" + key + ")\\z",
                                          config_path + ": " + field + " entry \"" + key + "\"");
      if (!re.ok()) return re.status();
      to->push_back({std::move(re).value(), value.get<double>()});
    }
  }
  const auto pattern_value = [](const std::vector<Pattern>& patterns, const std::string& module,
                                double otherwise) {
    for (const Pattern& p : patterns) {
      if (p.re.Search(module).kind == tokenizer::Regex::SearchResult::Kind::kComplete) {
        return p.value;
      }
    }
    return otherwise;
  };
  // PEFT's target_parameters: the fused expert tensors this reads.
  if (truthy("target_parameters")) {
    if (!cfg["target_parameters"].is_array()) {
      return refuse("\"target_parameters\" must be a list");
    }
    for (const auto& name : cfg["target_parameters"]) {
      const std::string n = name.is_string() ? name.get<std::string>() : name.dump();
      if (n != "gate_up_proj" && n != "down_proj" && !n.ends_with(".gate_up_proj") &&
          !n.ends_with(".down_proj")) {
        return refuse("target_parameters entry \"" + n +
                      "\" is not supported (the fused experts' gate_up_proj and down_proj are)");
      }
    }
  }

  const fs::path weights_path = fs::path(dir) / "adapter_model.safetensors";
  std::error_code ec;
  if (!fs::exists(weights_path, ec)) {
    if (fs::exists(fs::path(dir) / "adapter_model.bin", ec)) {
      return InvalidArgument(dir +
                             ": adapter_model.bin (a pickle) is not supported; save the "
                             "adapter with safe_serialization=True (adapter_model.safetensors)");
    }
    return NotFound(weights_path.string() + ": no such file");
  }
  RADIX_ASSIGN_OR_RETURN(auto opened,
                         SafetensorsFile::Open(weights_path.string(), /*use_mmap=*/true));
  const SafetensorsFile& file = opened;
  const std::string& fname = file.path();
  if (!file.other_dtypes().empty()) {
    return InvalidArgument(fname + ": tensor '" + file.other_dtypes().begin()->first +
                           "' has dtype " + file.other_dtypes().begin()->second +
                           " (LoRA matrices must be F32, F16 or BF16)");
  }
  // Where a matrix pair goes: a layer's projection, a routed expert's, the shared experts', or
  // PEFT's fused expert tensors (which one, gate_up_proj or down_proj, by the pair's shapes;
  // `expert` then counts the wrappers, ".base_layer", PEFT nested them in).
  enum Site : int { kLayerModule, kExpertModule, kSharedModule, kFusedExperts };
  struct Key {
    int64_t layer;
    int site;
    int64_t expert;
    int target;
    auto operator<=>(const Key&) const = default;
  };
  struct Pair {
    const SafetensorsTensor* a = nullptr;
    const SafetensorsTensor* b = nullptr;
    std::string module;  // PEFT's module name, for the patterns
  };
  std::map<Key, Pair> pairs;
  // An expert projection's name: HF's, or Mixtral's w1 (gate), w3 (up), w2 (down).
  const auto expert_target = [](const std::string& name) -> std::optional<LoraTarget> {
    if (name == "w1") return LoraTarget::kGate;
    if (name == "w3") return LoraTarget::kUp;
    if (name == "w2") return LoraTarget::kDown;
    const std::optional<LoraTarget> t = LoraTargetFromName(name);
    if (t && IsMlpTarget(*t)) return t;
    return std::nullopt;
  };
  for (const SafetensorsTensor& t : file.tensors()) {
    std::string name = t.name;
    const auto unsupported = [&] {
      return InvalidArgument(fname + ": tensor '" + t.name +
                             "' is not a LoRA matrix of a decoder layer's q/k/v/o/gate/up/down "
                             "projection, of an expert's, or of multi-head latent attention's "
                             "q_a/q_b/kv_a/kv_b (embedding, LM-head and other modules are not "
                             "supported)");
    };
    for (const char* prefix : {"base_model.model.", "model."}) {
      if (name.rfind(prefix, 0) == 0) name = name.substr(std::string(prefix).size());
    }
    if (name.rfind("layers.", 0) != 0) return unsupported();
    auto split = SplitLayer(name.substr(7));
    if (!split) return unsupported();
    auto [layer, rest] = *split;
    // rest: "<module>.lora_<A|B>[.default].weight"
    bool is_a;
    std::string module;
    for (const char* suffix : {".lora_A.weight", ".lora_A.default.weight"}) {
      if (rest.size() > std::string(suffix).size() && rest.ends_with(suffix)) {
        module = rest.substr(0, rest.size() - std::string(suffix).size());
      }
    }
    is_a = !module.empty();
    if (!is_a) {
      for (const char* suffix : {".lora_B.weight", ".lora_B.default.weight"}) {
        if (rest.size() > std::string(suffix).size() && rest.ends_with(suffix)) {
          module = rest.substr(0, rest.size() - std::string(suffix).size());
        }
      }
    }
    if (module.empty()) return unsupported();
    Key key{layer, kLayerModule, 0, 0};
    std::string wrapped = module;
    int64_t wrappers = 0;
    while (wrapped.ends_with(".base_layer")) {
      wrapped.resize(wrapped.size() - std::string(".base_layer").size());
      ++wrappers;
    }
    std::string tail;  // what follows an experts prefix
    for (const char* prefix : {"mlp.experts.", "block_sparse_moe.experts."}) {
      if (module.rfind(prefix, 0) == 0) tail = module.substr(std::string(prefix).size());
    }
    if (wrapped == "mlp.experts") {
      key = {layer, kFusedExperts, wrappers, 0};
    } else if (!tail.empty()) {
      auto expert = SplitLayer(tail);
      if (!expert) return unsupported();
      const std::optional<LoraTarget> target = expert_target(expert->second);
      if (!target) return unsupported();
      key = {layer, kExpertModule, expert->first, static_cast<int>(*target)};
    } else if (module.rfind("mlp.shared_expert.", 0) == 0 ||
               module.rfind("mlp.shared_experts.", 0) == 0) {
      const std::optional<LoraTarget> target = expert_target(module.substr(module.rfind('.') + 1));
      if (!target) return unsupported();
      key = {layer, kSharedModule, 0, static_cast<int>(*target)};
    } else {
      const size_t dot = module.find('.');
      if (dot == std::string::npos) return unsupported();
      const std::string block = module.substr(0, dot);
      const std::optional<LoraTarget> target = LoraTargetFromName(module.substr(dot + 1));
      if (!target || (block != "self_attn" && block != "mlp") ||
          (block == "self_attn") == IsMlpTarget(*target)) {
        return unsupported();
      }
      key.target = static_cast<int>(*target);
    }
    if (layer >= config.num_layers) {
      return InvalidArgument(fname + ": tensor '" + t.name + "' names layer " +
                             std::to_string(layer) + " but the model has " +
                             std::to_string(config.num_layers));
    }
    if (t.shape.size() != 2) {
      return InvalidArgument(fname + ": tensor '" + t.name + "' is not a matrix");
    }
    Pair& pair = pairs[key];
    (is_a ? pair.a : pair.b) = &t;
    pair.module = "model.layers." + std::to_string(layer) + "." + wrapped;
  }
  // The scale of a module's pair of rank `rank`, after checking that rank against the config.
  const auto scale_of = [&](const std::string& where, const std::string& module,
                            int64_t rank) -> Expected<float> {
    const auto want = static_cast<int64_t>(pattern_value(rank_pattern, module, r));
    if (rank != want) {
      return InvalidArgument(fname + ": " + where + " has rank " + std::to_string(rank) +
                             " but adapter_config.json says r=" + std::to_string(want));
    }
    const double a = pattern_value(alpha_pattern, module, alpha);
    return static_cast<float>(rslora ? a / std::sqrt(static_cast<double>(rank))
                                     : a / static_cast<double>(rank));
  };
  for (const auto& [key, pair] : pairs) {
    const int64_t layer = key.layer;
    const auto target = static_cast<LoraTarget>(key.target);
    const std::string where = key.site == kLayerModule
                                  ? "layer " + std::to_string(layer) + " " + LoraTargetName(target)
                                  : pair.module;
    if (pair.a == nullptr || pair.b == nullptr) {
      return InvalidArgument(fname + ": " + where + " has lora_" + (pair.a ? "A" : "B") +
                             " but no lora_" + (pair.a ? "B" : "A"));
    }
    const SafetensorsTensor& a = *pair.a;
    const SafetensorsTensor& b = *pair.b;
    if (a.shape[0] != b.shape[1]) {
      return InvalidArgument(fname + ": " + where + ": lora_A rank " + std::to_string(a.shape[0]) +
                             " differs from lora_B rank " + std::to_string(b.shape[1]));
    }
    const kernels::WeightFormat stored = StoredFormat(a.format, b.format);
    if (key.site != kFusedExperts) {
      LoraWeights w;
      w.rank = a.shape[0];
      w.in = a.shape[1];
      w.out = b.shape[0];
      RADIX_ASSIGN_OR_RETURN(w.scale, scale_of(where, pair.module, w.rank));
      w.a = ToFloat(a.format, w.rank, w.in, a.data);
      std::vector<float> bf = ToFloat(b.format, w.out, w.rank, b.data);
      if (key.site == kLayerModule) {
        RADIX_RETURN_IF_ERROR(Place(fname, layer, target, std::move(w), std::move(bf), stored,
                                    config, options, kernels::RopeLayout::kRotateHalf));
      } else {
        RADIX_RETURN_IF_ERROR(PlaceExpert(fname, layer, key.site == kSharedModule ? -1 : key.expert,
                                          target, false, std::move(w), bf, stored, config,
                                          options));
      }
      continue;
    }
    // Fused: lora_A [experts x rank, in] stacks the experts' A; lora_B [out, rank x experts] has
    // expert e's rank-k column at k x experts + e (PEFT's ParamWrapper).
    const int64_t E = config.num_experts, H = config.hidden_size, I = config.moe_intermediate_size;
    const int64_t in = a.shape[1], out = b.shape[0];
    const bool gate_up = in == H && out == 2 * I;
    if (E == 0 || a.shape[0] % E != 0 || (!gate_up && !(in == I && out == H))) {
      return InvalidArgument(fname + ": " + where + ": shape A [" + std::to_string(a.shape[0]) +
                             ", " + std::to_string(in) + "], B [" + std::to_string(out) + ", " +
                             std::to_string(b.shape[1]) + "] is neither the fused experts' " +
                             "gate_up_proj nor their down_proj for the base model (" +
                             std::to_string(E) + " experts, hidden " + std::to_string(H) +
                             ", width " + std::to_string(I) + ")");
    }
    const std::string module = pair.module + (gate_up ? ".gate_up_proj" : ".down_proj");
    const bool interleaved = config.moe_gating == ModelConfig::MoeGating::kTopKSoftmax;
    const int64_t rank = a.shape[0] / E;
    RADIX_ASSIGN_OR_RETURN(const float scale, scale_of(module, module, rank));
    const kernels::WeightMatrix as{a.format, a.shape[0], in, a.data};
    const std::vector<float> bf = ToFloat(b.format, out, b.shape[1], b.data);
    for (int64_t e = 0; e < E; ++e) {
      LoraWeights w = StackedExpertA(as, e, rank, out, scale);
      std::vector<float> be(static_cast<size_t>(out * rank));
      for (int64_t o = 0; o < out; ++o) {
        // gpt-oss interleaves gate (even) and up (odd) outputs; the others put gate rows first.
        const int64_t to = gate_up && interleaved ? (o % 2) * I + o / 2 : o;
        for (int64_t k = 0; k < rank; ++k) be[to * rank + k] = bf[o * E * rank + k * E + e];
      }
      RADIX_RETURN_IF_ERROR(PlaceExpert(fname, layer, e,
                                        gate_up ? LoraTarget::kGate : LoraTarget::kDown, gate_up,
                                        std::move(w), be, stored, config, options));
    }
  }
  return Status::Ok();
}

Status LoraAdapter::LoadGguf(const std::string& path, const ModelConfig& config,
                             const LoraLoadOptions& options) {
  format_ = "gguf";
  RADIX_ASSIGN_OR_RETURN(auto opened, GgufFile::Open(path, /*use_mmap=*/true));
  const GgufFile& gguf = opened;
  std::optional<std::string> type, adapter_type, arch;
  std::optional<double> alpha;
  RADIX_ASSIGN_OR_RETURN(type, gguf.GetString("general.type"));
  RADIX_ASSIGN_OR_RETURN(adapter_type, gguf.GetString("adapter.type"));
  if (type.value_or("") != "adapter" || adapter_type.value_or("") != "lora") {
    return InvalidArgument(path +
                           ": not a GGUF LoRA adapter (general.type must be \"adapter\" "
                           "and adapter.type \"lora\", as llama.cpp's convert_lora_to_gguf.py "
                           "writes them)");
  }
  RADIX_ASSIGN_OR_RETURN(alpha, gguf.GetFloat("adapter.lora.alpha"));
  RADIX_ASSIGN_OR_RETURN(arch, gguf.GetString("general.architecture"));
  // llama.cpp's converter writes llama Q/K rows (and so their LoRA B rows) interleaved.
  const kernels::RopeLayout layout = arch.value_or("") == "llama"
                                         ? kernels::RopeLayout::kInterleaved
                                         : kernels::RopeLayout::kRotateHalf;
  // (layer, target, site) -> {lora_a, lora_b}; site 0 a layer's projection, 1 the routed experts'
  // stacked [experts, ...] tensors (ffn_*_exps), 2 the shared experts' (ffn_*_shexp).
  std::map<std::tuple<int64_t, int, int>, std::pair<const GgufTensorInfo*, const GgufTensorInfo*>>
      pairs;
  for (const GgufTensorInfo& t : gguf.tensors()) {
    const auto unsupported = [&] {
      return InvalidArgument(path + ": tensor '" + t.name +
                             "' is not a LoRA matrix of a decoder layer's q/k/v/o/gate/up/down "
                             "projection, of its experts' (ffn_*_exps, ffn_*_shexp), or of "
                             "multi-head latent attention's q_a/q_b/kv_a/kv_b (embedding, "
                             "LM-head and other tensors are not supported)");
    };
    const bool is_a = t.name.ends_with(".weight.lora_a");
    if (!is_a && !t.name.ends_with(".weight.lora_b")) return unsupported();
    if (t.name.rfind("blk.", 0) != 0) return unsupported();
    auto split = SplitLayer(t.name.substr(4));
    if (!split) return unsupported();
    const auto& [layer, rest] = *split;
    std::string module = rest.substr(0, rest.size() - std::string(".weight.lora_a").size());
    if (module == "attn_k_b" || module == "attn_v_b") {
      return InvalidArgument(path + ": tensor '" + t.name +
                             "': LoRA on kv_b_proj split into attn_k_b / attn_v_b is not "
                             "supported; load the PEFT adapter folder instead");
    }
    int site = 0;
    for (const auto& [suffix, kind] : {std::pair{"_exps", 1}, std::pair{"_shexp", 2}}) {
      if (module.ends_with(suffix)) {
        module.resize(module.size() - std::string(suffix).size());
        site = kind;
      }
    }
    const std::optional<LoraTarget> target = TargetFromGgufName(module);
    if (!target || (site != 0 && !IsMlpTarget(*target))) return unsupported();
    if (layer >= config.num_layers) {
      return InvalidArgument(path + ": tensor '" + t.name + "' names layer " +
                             std::to_string(layer) + " but the model has " +
                             std::to_string(config.num_layers));
    }
    if (t.shape.size() != (site == 1 ? 3u : 2u)) {
      return InvalidArgument(path + ": tensor '" + t.name + "' is not a " +
                             (site == 1 ? "stack of matrices [experts, rows, columns]" : "matrix"));
    }
    auto& slot = pairs[{layer, static_cast<int>(*target), site}];
    (is_a ? slot.first : slot.second) = &t;
  }
  for (const auto& [key, ab] : pairs) {
    const auto [layer, target, site] = key;
    const std::string where = "layer " + std::to_string(layer) + " " +
                              kGgufNames[static_cast<size_t>(target)] +
                              (site == 1   ? "_exps"
                               : site == 2 ? "_shexp"
                                           : "");
    if (ab.first == nullptr || ab.second == nullptr) {
      return InvalidArgument(path + ": " + where + " has lora_" + (ab.first ? "a" : "b") +
                             " but no lora_" + (ab.first ? "b" : "a"));
    }
    const GgufTensorInfo& a = *ab.first;
    const GgufTensorInfo& b = *ab.second;
    // Routed experts: lora_a [experts, rank, in], lora_b [experts, out, rank].
    const size_t m = site == 1 ? 1 : 0;  // the matrices' first axis
    const int64_t stack = site == 1 ? a.shape[0] : 1;
    if (a.shape[m] != b.shape[m + 1] || a.shape[m] <= 0 || (site == 1 && b.shape[0] != stack)) {
      return InvalidArgument(path + ": " + where + ": lora_a rank " + std::to_string(a.shape[m]) +
                             " differs from lora_b rank " + std::to_string(b.shape[m + 1]));
    }
    const int64_t rank = a.shape[m], in = a.shape[m + 1], out = b.shape[m];
    if (site == 1 && stack != config.num_experts) {
      return InvalidArgument(path + ": " + where + " stacks " + std::to_string(stack) +
                             " experts but the base model has " +
                             std::to_string(config.num_experts));
    }
    const kernels::WeightMatrix as{a.format, stack * rank, in, a.data};
    const kernels::WeightMatrix bs{b.format, stack * out, rank, b.data};
    const double al = alpha.value_or(0.0);
    const float scale = al != 0.0 ? static_cast<float>(al / static_cast<double>(rank)) : 1.0f;
    const kernels::WeightFormat stored = StoredFormat(a.format, b.format);
    for (int64_t e = 0; e < stack; ++e) {
      LoraWeights w = StackedExpertA(as, e, rank, out, scale);
      std::vector<float> bf = ToFloat(bs.Rows(e * out, out));
      if (site == 0) {
        RADIX_RETURN_IF_ERROR(Place(path, layer, static_cast<LoraTarget>(target), std::move(w),
                                    std::move(bf), stored, config, options, layout));
      } else {
        RADIX_RETURN_IF_ERROR(PlaceExpert(path, layer, site == 1 ? e : -1,
                                          static_cast<LoraTarget>(target), false, std::move(w), bf,
                                          stored, config, options));
      }
    }
  }
  return Status::Ok();
}

Status LoraAdapter::Place(const std::string& file, int64_t layer, LoraTarget target, LoraWeights w,
                          std::vector<float> b, kernels::WeightFormat stored, const ModelConfig& c,
                          const LoraLoadOptions& options, kernels::RopeLayout adapter_layout) {
  const std::string where =
      file + ": layer " + std::to_string(layer) + " " + LoraTargetName(target);
  const ModelConfig::Mla& mla = c.mla;
  if (options.moe && IsMlpTarget(target) && layer >= c.first_dense_layers) {
    return InvalidArgument(where +
                           ": the layer's MLP is a mixture of experts; its adapter names the "
                           "experts' projections (mlp.experts.E.<proj>, or PEFT's "
                           "target_parameters gate_up_proj / down_proj)");
  }
  if (mla.enabled()) {
    const bool q_lora = mla.q_lora_rank > 0;
    if (target == LoraTarget::kK || target == LoraTarget::kV ||
        (target == LoraTarget::kQ && q_lora) ||
        ((target == LoraTarget::kQa || target == LoraTarget::kQb) && !q_lora)) {
      return InvalidArgument(
          where + ": the base model's multi-head latent attention has no such projection (it has " +
          (q_lora ? "q_a_proj, q_b_proj" : "q_proj") + ", kv_a_proj_with_mqa, kv_b_proj, o_proj)");
    }
  } else if (IsMlaOnlyTarget(target)) {
    return InvalidArgument(where + ": " + LoraTargetName(target) +
                           " is a multi-head latent attention projection; the base model has "
                           "q/k/v/o projections");
  }
  const int64_t q_dim = mla.enabled() ? c.num_heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim)
                                      : c.num_heads * c.head_dim;
  const int64_t kv_dim = c.num_kv_heads * c.head_dim;
  int64_t in = c.hidden_size, out = c.hidden_size;
  switch (target) {
    case LoraTarget::kQ:
    case LoraTarget::kQb:
      out = q_dim;
      if (target == LoraTarget::kQb) in = mla.q_lora_rank;
      break;
    case LoraTarget::kQa:
      out = mla.q_lora_rank;
      break;
    case LoraTarget::kKvA:
      out = mla.kv_lora_rank + mla.qk_rope_head_dim;
      break;
    case LoraTarget::kKvB:
      in = mla.kv_lora_rank;
      out = c.num_heads * (mla.qk_nope_head_dim + mla.v_head_dim);
      break;
    case LoraTarget::kK:
    case LoraTarget::kV:
      out = kv_dim;
      break;
    case LoraTarget::kO:
      in = mla.enabled() ? c.num_heads * mla.v_head_dim : q_dim;
      break;
    case LoraTarget::kGate:
    case LoraTarget::kUp:
      out = c.intermediate_size;
      break;
    case LoraTarget::kDown:
      in = c.intermediate_size;
      break;
  }
  if ((target == LoraTarget::kQ || target == LoraTarget::kK) && !mla.enabled() &&
      adapter_layout != options.base_rope_layout && w.out == out) {
    const int64_t heads = target == LoraTarget::kQ ? c.num_heads : c.num_kv_heads;
    b = PermuteHeads(b, heads, c.head_dim, w.rank,
                     options.base_rope_layout == kernels::RopeLayout::kInterleaved);
  }
  RADIX_RETURN_IF_ERROR(Finish(where, {target}, w, b, stored, in, out, options));
  layers_[static_cast<size_t>(layer)][static_cast<size_t>(target)] = std::move(w);
  return Status::Ok();
}

Status LoraAdapter::PlaceExpert(const std::string& file, int64_t layer, int64_t expert,
                                LoraTarget target, bool gate_up, LoraWeights w,
                                const std::vector<float>& b, kernels::WeightFormat stored,
                                const ModelConfig& c, const LoraLoadOptions& options) {
  const std::string name = gate_up ? "gate_up_proj" : LoraTargetName(target);
  const std::string where =
      file + ": layer " + std::to_string(layer) + " " +
      (expert < 0 ? std::string("shared experts") : "expert " + std::to_string(expert)) + " " +
      name;
  if (!options.moe || c.num_experts == 0 || layer < c.first_dense_layers) {
    return InvalidArgument(where + ": the base model's layer " + std::to_string(layer) +
                           " has no mixture of experts");
  }
  if (c.moe_gating == ModelConfig::MoeGating::kTopKSoftmax && !gate_up &&
      target != LoraTarget::kDown) {
    // transformers keeps gpt-oss's experts fused (gate_up_proj, gate and up interleaved); PEFT
    // adapts them only as such.
    return InvalidArgument(where +
                           ": gpt-oss experts take LoRA on the fused gate_up_proj and down_proj "
                           "(PEFT's target_parameters), not on separate gate / up projections");
  }
  if (expert >= c.num_experts) {
    return InvalidArgument(where + ": the base model has " + std::to_string(c.num_experts) +
                           " experts");
  }
  const int64_t width = expert < 0 ? c.shared_expert_intermediate_size : c.moe_intermediate_size;
  if (expert < 0 && width == 0) {
    return InvalidArgument(where + ": the base model's MoE layers have no shared experts");
  }
  const int64_t in = target == LoraTarget::kDown ? width : c.hidden_size;
  const int64_t out = target == LoraTarget::kDown ? c.hidden_size : (gate_up ? 2 : 1) * width;
  if (gate_up) {
    RADIX_RETURN_IF_ERROR(
        Finish(where, {LoraTarget::kGate, LoraTarget::kUp}, w, b, stored, in, out, options));
  } else {
    RADIX_RETURN_IF_ERROR(Finish(where, {target}, w, b, stored, in, out, options));
  }
  ExpertLora* to = &shared_[static_cast<size_t>(layer)];
  if (expert >= 0) {
    auto& experts = experts_[static_cast<size_t>(layer)];
    if (experts.empty()) experts.resize(static_cast<size_t>(c.num_experts));
    to = &experts[static_cast<size_t>(expert)];
  }
  std::optional<LoraWeights>& slot = gate_up                       ? to->gate_up
                                     : target == LoraTarget::kGate ? to->gate
                                     : target == LoraTarget::kUp   ? to->up
                                                                   : to->down;
  slot = std::move(w);
  if ((to->gate_up && (to->gate || to->up))) {
    return InvalidArgument(where +
                           ": the adapter gives this expert both a fused gate_up_proj "
                           "and a separate gate_proj / up_proj");
  }
  return Status::Ok();
}

Status LoraAdapter::Finish(const std::string& where, std::initializer_list<LoraTarget> targets,
                           LoraWeights& w, const std::vector<float>& b,
                           kernels::WeightFormat stored, int64_t in, int64_t out,
                           const LoraLoadOptions& options) {
  for (const LoraTarget target : targets) {
    if (!options.allowed_targets.empty() &&
        std::find(options.allowed_targets.begin(), options.allowed_targets.end(), target) ==
            options.allowed_targets.end()) {
      return InvalidArgument(where + ": " + LoraTargetName(target) +
                             " is not in --lora-target-modules");
    }
  }
  if (options.max_rank > 0 && w.rank > options.max_rank) {
    return InvalidArgument(where + ": rank " + std::to_string(w.rank) +
                           " exceeds --max-lora-rank " + std::to_string(options.max_rank));
  }
  if (w.in != in || w.out != out) {
    return InvalidArgument(where + ": shape A [" + std::to_string(w.rank) + ", " +
                           std::to_string(w.in) + "], B [" + std::to_string(w.out) + ", " +
                           std::to_string(w.rank) + "] does not fit the base model's [" +
                           std::to_string(out) + ", " + std::to_string(in) + "] projection");
  }
  w.b_t.resize(b.size());
  for (int64_t o = 0; o < w.out; ++o) {
    for (int64_t k = 0; k < w.rank; ++k) w.b_t[k * w.out + o] = b[o * w.rank + k];
  }
  if (stored == kernels::WeightFormat::kF16 || stored == kernels::WeightFormat::kBF16) {
    // Every value came from the file's 16-bit numbers (the head permutation only moves them):
    // back to 16 bits exactly.
    const auto narrow = [stored](const std::vector<float>& from) {
      std::vector<uint16_t> to(from.size());
      for (size_t i = 0; i < from.size(); ++i) {
        to[i] = stored == kernels::WeightFormat::kF16 ? kernels::F32ToF16(from[i])
                                                      : kernels::F32ToBf16(from[i]);
      }
      return to;
    };
    w.half = stored;
    w.a16 = narrow(w.a);
    w.b_t16 = narrow(w.b_t);
    w.a = {};
    w.b_t = {};
  }
  rank_ = std::max(rank_, w.rank);
  bytes_ += static_cast<int64_t>((w.a.size() + w.b_t.size()) * sizeof(float) +
                                 (w.a16.size() + w.b_t16.size()) * sizeof(uint16_t));
  for (const LoraTarget target : targets) {
    if (std::find(targets_.begin(), targets_.end(), target) == targets_.end()) {
      targets_.push_back(target);
    }
  }
  return Status::Ok();
}

void ApplyLoraRows(const kernels::KernelTable& kt, ThreadPool* pool, const LoraRows& rows,
                   int64_t layer, const float* x, std::initializer_list<LoraOut> outs) {
  // Row i's update: mid_k = scale * A_k x (dot products), then out += mid_k * (B^T)_k (axpys
  // over B's transposed rows), rank after rank, float32 throughout, all on one thread: a row's
  // result does not depend on the batch it is in. A row's matrices are small enough to stay in
  // cache, so no gather into per-adapter blocks pays. (Splitting one row's ranks over the threads
  // cost more in hand-offs and partial sums than the second core gained, on Zen 5.)
  const auto update = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (const LoraOut& o : outs) {
        const LoraWeights* w = rows.adapters[static_cast<size_t>(i)]->Find(layer, o.target);
        if (w == nullptr) continue;
        const int64_t row = rows.rows[static_cast<size_t>(i)];
        const float* xt = x + row * w->in;
        float* out = o.y + row * o.stride;
        w->Add(kt, xt, out);
      }
    }
  };
  ForEachLoraRow(pool, rows, update);
}

}  // namespace radixserve::model

#include "model/model_loader.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/log.h"
#include "common/status.h"
#include "kernels/matmul.h"
#include "model/bert_model.h"
#include "model/decoder_pooler.h"
#include "model/gemma3_model.h"
#include "model/gguf_file.h"
#include "model/llama_model.h"
#include "model/safetensors_file.h"
#include "model/weight_store.h"

namespace radixserve::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What a model path resolves to.
struct Checkpoint {
  enum class Kind { kHf, kGguf } kind = Kind::kHf;
  std::string gguf_path;  // kGguf
  std::string folder;     // kHf
};

Expected<json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot read");
  std::stringstream buffer;
  buffer << in.rdbuf();
  json j = json::parse(buffer.str(), nullptr, false);
  if (j.is_discarded()) return DataLoss(path + ": not valid JSON");
  return j;
}

Expected<Checkpoint> Resolve(const LoadOptions& o) {
  static const char* kUnsupportedFormats[] = {
      "pt",     "npcache",         "sharded_state", "bitsandbytes", "mistral", "layered",
      "remote", "fastsafetensors", "jax",           "private",      "flash_rl"};
  for (const char* f : kUnsupportedFormats) {
    if (o.load_format == f) {
      return Unsupported("--load-format " + o.load_format +
                         " is not supported (supported: auto, safetensors, gguf, dummy)");
    }
  }
  if (o.load_format != "auto" && o.load_format != "safetensors" && o.load_format != "gguf" &&
      o.load_format != "dummy") {
    return InvalidArgument("--load-format " + o.load_format + " is unknown");
  }
  std::error_code ec;
  const fs::path path(o.model_path);
  if (!fs::exists(path, ec)) {
    return NotFound(o.model_path +
                    ": no such file or directory (radixserve cannot download from a hub)");
  }
  Checkpoint cp;
  if (fs::is_regular_file(path, ec)) {
    if (path.extension() != ".gguf" && o.load_format != "gguf") {
      return InvalidArgument(o.model_path + ": a model file must be .gguf (or pass a folder)");
    }
    if (o.load_format == "safetensors") {
      return InvalidArgument(o.model_path + ": --load-format safetensors needs an HF folder");
    }
    cp.kind = Checkpoint::Kind::kGguf;
    cp.gguf_path = path.string();
    return cp;
  }
  std::vector<std::string> ggufs;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".gguf")
      ggufs.push_back(entry.path().string());
  }
  const bool has_config = fs::exists(path / "config.json", ec);
  const bool want_gguf = o.load_format == "gguf" || (o.load_format != "safetensors" && !has_config);
  if (want_gguf) {
    if (ggufs.size() != 1) {
      if (!ggufs.empty())
        return InvalidArgument(o.model_path + ": several .gguf files; pass one of them");
      return NotFound(o.model_path +
                      (has_config ? ": no .gguf file" : ": no config.json and no .gguf file"));
    }
    cp.kind = Checkpoint::Kind::kGguf;
    cp.gguf_path = ggufs.front();
    return cp;
  }
  if (!has_config) return NotFound(o.model_path + ": no config.json");
  cp.kind = Checkpoint::Kind::kHf;
  cp.folder = path.string();
  return cp;
}

Expected<kernels::WeightFormat> DummyFormat(const std::string& dtype) {
  if (dtype == "auto") return kernels::WeightFormat::kF32;
  if (const auto format = DtypeFormat(dtype)) return *format;
  return InvalidArgument("--dtype " + dtype +
                         " is unknown (auto, half, float16, bfloat16, float, float32)");
}

// Config JSON (overrides applied) plus, for GGUF, the parsed file.
struct ConfigSource {
  json config;
  json generation;
  bool has_generation = false;
  std::string name;
  std::unique_ptr<GgufFile> gguf;
};

Expected<ConfigSource> ReadConfig(const LoadOptions& o, const Checkpoint& cp) {
  ConfigSource src;
  if (cp.kind == Checkpoint::Kind::kGguf) {
    RADIX_ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(cp.gguf_path, !o.disable_mmap));
    src.gguf = std::make_unique<GgufFile>(std::move(gguf));
    RADIX_ASSIGN_OR_RETURN(src.config, GgufConfigJson(*src.gguf));
    src.name = cp.gguf_path;
  } else {
    src.name = (fs::path(cp.folder) / "config.json").string();
    RADIX_ASSIGN_OR_RETURN(src.config, ReadJsonFile(src.name));
    const fs::path gen = fs::path(cp.folder) / "generation_config.json";
    std::error_code ec;
    if (fs::exists(gen, ec)) {
      RADIX_ASSIGN_OR_RETURN(src.generation, ReadJsonFile(gen.string()));
      src.has_generation = true;
    }
  }
  RADIX_RETURN_IF_ERROR(ApplyJsonOverride(src.config, o.json_override));
  return src;
}

Expected<ModelConfig> BuildConfig(const LoadOptions& o, const ConfigSource& src) {
  RADIX_ASSIGN_OR_RETURN(
      auto config,
      ParseModelConfig(src.config, src.has_generation ? &src.generation : nullptr, src.name));
  if (o.context_length > 0) config.context_length = o.context_length;
  RADIX_RETURN_IF_ERROR(DummyFormat(o.dtype).status());
  return config;
}

Expected<std::vector<SafetensorsFile>> OpenSafetensors(const std::string& folder, bool use_mmap) {
  const fs::path dir(folder);
  std::vector<std::string> shards;
  std::error_code ec;
  if (fs::exists(dir / "model.safetensors.index.json", ec)) {
    const std::string index_path = (dir / "model.safetensors.index.json").string();
    json index;
    RADIX_ASSIGN_OR_RETURN(index, ReadJsonFile(index_path));
    if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
      return DataLoss(index_path + ": no weight_map object");
    }
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string())
        return DataLoss(index_path + ": weight_map entry " + name + " is not a file name");
      const std::string shard = file.get<std::string>();
      if (shard.find('/') != std::string::npos)
        return DataLoss(index_path + ": shard name " + shard + " has a path");
      if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
    }
  } else if (fs::exists(dir / "model.safetensors", ec)) {
    shards.push_back("model.safetensors");
  } else {
    return NotFound(folder +
                    ": no model.safetensors or model.safetensors.index.json "
                    "(only safetensors weights are supported for HF folders)");
  }
  std::vector<SafetensorsFile> files;
  for (const std::string& shard : shards) {
    RADIX_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open((dir / shard).string(), use_mmap));
    files.push_back(std::move(file));
  }
  return files;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// XForSequenceClassification and headless XModel -> XForCausalLM; anything else unchanged.
std::string PoolingDecoderBase(const std::string& arch) {
  for (std::string_view suffix : {"ForSequenceClassification", "Model"}) {
    if (EndsWith(arch, suffix)) {
      return arch.substr(0, arch.size() - suffix.size()) + "ForCausalLM";
    }
  }
  return arch;
}

// A classifier's labels and score activation from config.json.
Expected<std::vector<std::string>> ClassifierLabels(const json& config, const std::string& where);

Expected<ClassifierInfo> ReadClassifierInfo(const json& config, const std::string& where) {
  ClassifierInfo info;
  RADIX_ASSIGN_OR_RETURN(info.labels, ClassifierLabels(config, where));
  auto it = config.find("sbert_ce_default_activation_function");
  if (it != config.end() && !it->is_null()) {
    const std::string name = it->is_string() ? it->get<std::string>() : it->dump();
    if (name == "torch.nn.modules.activation.Sigmoid") {
      info.activation = ScoreActivation::kSigmoid;
    } else if (name != "torch.nn.modules.linear.Identity") {
      return Unsupported(where + ": sbert_ce_default_activation_function " + name +
                         " is not supported (supported: torch.nn.modules.activation.Sigmoid, "
                         "torch.nn.modules.linear.Identity)");
    }
  }
  return info;
}

// config.json id2label by id (num_labels of them), LABEL_i where absent.
Expected<std::vector<std::string>> ClassifierLabels(const json& config, const std::string& where) {
  int64_t n = 0;
  if (config.contains("id2label") && config["id2label"].is_object()) {
    n = static_cast<int64_t>(config["id2label"].size());
  }
  if (config.contains("num_labels")) {
    if (!config["num_labels"].is_number_integer() || config["num_labels"].get<int64_t>() < 1) {
      return DataLoss(where + ": num_labels must be a positive integer");
    }
    n = config["num_labels"].get<int64_t>();
  }
  if (n == 0) n = 2;  // transformers' PretrainedConfig default
  if (n > 100000) return DataLoss(where + ": num_labels is implausibly large");
  std::vector<std::string> labels;
  for (int64_t i = 0; i < n; ++i) {
    const std::string key = std::to_string(i);
    const json* id2label = config.contains("id2label") ? &config["id2label"] : nullptr;
    if (id2label != nullptr && id2label->is_object() && id2label->contains(key) &&
        (*id2label)[key].is_string()) {
      labels.push_back((*id2label)[key].get<std::string>());
    } else {
      labels.push_back("LABEL_" + key);
    }
  }
  return labels;
}

Expected<std::unique_ptr<CausalLM>> BuildModel(ModelConfig config,
                                               std::unique_ptr<WeightStore> weights) {
  // An embedder or classifier checkpoint runs the decoder of its causal-LM relative.
  const std::string arch =
      config.hidden_states_only ? PoolingDecoderBase(config.architecture) : config.architecture;
  if (arch == "LlamaForCausalLM" || arch == "MistralForCausalLM" || arch == "GraniteForCausalLM" ||
      arch == "SmolLM3ForCausalLM") {
    return LlamaModel::Create(std::move(config), std::move(weights), {});
  }
  if (arch == "Qwen2ForCausalLM") {
    return LlamaModel::Create(std::move(config), std::move(weights), LlamaVariant{true, false});
  }
  if (arch == "Qwen3ForCausalLM") {
    return LlamaModel::Create(std::move(config), std::move(weights), LlamaVariant{false, true});
  }
  if (arch == "MixtralForCausalLM") {
    return LlamaModel::Create(std::move(config), std::move(weights), LlamaVariant{.moe = true});
  }
  if (arch == "OlmoeForCausalLM") {
    return LlamaModel::Create(
        std::move(config), std::move(weights),
        LlamaVariant{.qkv_bias = false, .qk_norm = true, .moe = true, .qk_norm_full = true});
  }
  if (arch == "Phi3ForCausalLM") {
    return LlamaModel::Create(std::move(config), std::move(weights),
                              LlamaVariant{.gate_up_in_up = true});
  }
  if (arch == "Olmo2ForCausalLM") {
    return LlamaModel::Create(
        std::move(config), std::move(weights),
        LlamaVariant{.qk_norm = true, .qk_norm_full = true, .post_norms_only = true});
  }
  if (arch == "Qwen2MoeForCausalLM") {
    return LlamaModel::Create(std::move(config), std::move(weights),
                              LlamaVariant{.qkv_bias = true, .qk_norm = false, .moe = true});
  }
  if (arch == "Qwen3MoeForCausalLM") {
    return LlamaModel::Create(std::move(config), std::move(weights),
                              LlamaVariant{.qkv_bias = false, .qk_norm = true, .moe = true});
  }
  if (arch == "GptOssForCausalLM") {
    return LlamaModel::Create(std::move(config), std::move(weights),
                              LlamaVariant{.moe = true, .gpt_oss = true});
  }
  if (arch == "DeepseekV2ForCausalLM" || arch == "DeepseekV3ForCausalLM") {
    return LlamaModel::Create(std::move(config), std::move(weights),
                              LlamaVariant{.moe = true, .mla = true});
  }
  if (arch == "Gemma3ForCausalLM") {
    return Gemma3Model::Create(std::move(config), std::move(weights));
  }
  if (arch == "Gemma2ForCausalLM") {
    return Gemma3Model::Create(std::move(config), std::move(weights), /*gemma2=*/true);
  }
  if (IsEncoderArchitecture(arch)) {
    return Unsupported("architecture " + arch +
                       " is an encoder: it serves embeddings (--is-embedding), not generation");
  }
  return Unsupported("architecture " + arch +
                     " is not supported (supported: DeepseekV2ForCausalLM, DeepseekV3ForCausalLM, "
                     "Gemma2ForCausalLM, Gemma3ForCausalLM, "
                     "GptOssForCausalLM, GraniteForCausalLM, LlamaForCausalLM, MistralForCausalLM, "
                     "MixtralForCausalLM, Olmo2ForCausalLM, OlmoeForCausalLM, Phi3ForCausalLM, "
                     "Qwen2ForCausalLM, Qwen2MoeForCausalLM, Qwen3ForCausalLM, "
                     "Qwen3MoeForCausalLM, SmolLM3ForCausalLM); "
                     "--trust-remote-code cannot help: "
                     "radixserve does not run custom model code");
}

}  // namespace

std::optional<kernels::WeightFormat> DtypeFormat(std::string_view dtype) {
  if (dtype == "float" || dtype == "float32") return kernels::WeightFormat::kF32;
  if (dtype == "half" || dtype == "float16") return kernels::WeightFormat::kF16;
  if (dtype == "bfloat16") return kernels::WeightFormat::kBF16;
  return std::nullopt;
}

bool IsEncoderArchitecture(std::string_view architecture) {
  return architecture == "BertModel" || architecture == "RobertaModel" ||
         architecture == "XLMRobertaModel" || IsEncoderClassifier(architecture);
}

bool IsEncoderClassifier(std::string_view architecture) {
  return architecture == "BertForSequenceClassification" ||
         architecture == "RobertaForSequenceClassification" ||
         architecture == "XLMRobertaForSequenceClassification";
}

Expected<std::unique_ptr<EncoderModel>> LoadEncoderModel(const LoadOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  Checkpoint cp;
  RADIX_ASSIGN_OR_RETURN(cp, Resolve(options));
  if (cp.kind != Checkpoint::Kind::kHf) {
    return Unsupported(options.model_path +
                       ": encoder models load from an HF folder (config.json + safetensors)");
  }
  ConfigSource src;
  RADIX_ASSIGN_OR_RETURN(src, ReadConfig(options, cp));
  ModelConfig config;
  RADIX_ASSIGN_OR_RETURN(config, BuildConfig(options, src));
  if (!IsEncoderArchitecture(config.architecture)) {
    return Unsupported("architecture " + config.architecture +
                       " is not an encoder model (supported encoders: BertModel, "
                       "BertForSequenceClassification, RobertaModel, "
                       "RobertaForSequenceClassification, XLMRobertaModel, "
                       "XLMRobertaForSequenceClassification)");
  }
  std::unique_ptr<WeightStore> weights;
  if (options.load_format == "dummy") {
    kernels::WeightFormat format;
    RADIX_ASSIGN_OR_RETURN(format, DummyFormat(options.dtype));
    weights = WeightStore::Dummy(options.random_seed, format);
  } else {
    std::vector<SafetensorsFile> files;
    RADIX_ASSIGN_OR_RETURN(files, OpenSafetensors(cp.folder, !options.disable_mmap));
    RADIX_ASSIGN_OR_RETURN(weights,
                           WeightStore::FromSafetensors(std::move(files), config.model_type));
    weights->set_matrix_storage(DtypeFormat(options.dtype));
  }
  PoolingConfig pooling;
  RADIX_ASSIGN_OR_RETURN(pooling, LoadPoolingConfig(cp.folder, PoolingConfig{}));
  ClassifierInfo classifier;
  if (IsEncoderClassifier(config.architecture)) {
    RADIX_ASSIGN_OR_RETURN(classifier, ReadClassifierInfo(src.config, options.model_path));
  }
  std::unique_ptr<EncoderModel> model;
  RADIX_ASSIGN_OR_RETURN(model, BertModel::Create(std::move(config), pooling, std::move(weights),
                                                  std::move(classifier)));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RADIX_LOG_INFO(
      "Load weight end. arch={}, encoder, {}{}, weight bytes={:.2f} MB, load time={:.2f} s",
      model->config().architecture,
      model->classifier().labels.empty()
          ? std::string("pooling=") + PoolingModeName(model->pooling().mode)
          : "classifier (CLS pooler, " + std::to_string(model->classifier().labels.size()) +
                " labels)",
      model->classifier().labels.empty() && model->pooling().normalize ? " + normalize" : "",
      static_cast<double>(model->weight_bytes()) / (1 << 20), seconds);
  return model;
}

Expected<ModelConfig> LoadModelConfig(const LoadOptions& options) {
  Checkpoint cp;
  RADIX_ASSIGN_OR_RETURN(cp, Resolve(options));
  ConfigSource src;
  RADIX_ASSIGN_OR_RETURN(src, ReadConfig(options, cp));
  return BuildConfig(options, src);
}

namespace {

// A decoder as LoadModel loads it, with what the pooling loader still reads afterwards.
struct LoadedDecoder {
  std::unique_ptr<CausalLM> model;
  WeightStore* store = nullptr;  // owned by the model
  json config_json;              // config.json (empty for a GGUF file)
  std::string folder;            // the HF folder ("" for a GGUF file)
};

Expected<LoadedDecoder> LoadDecoder(const LoadOptions& options, bool hidden_states_only) {
  const auto start = std::chrono::steady_clock::now();
  Checkpoint cp;
  RADIX_ASSIGN_OR_RETURN(cp, Resolve(options));
  ConfigSource src;
  RADIX_ASSIGN_OR_RETURN(src, ReadConfig(options, cp));
  ModelConfig config;
  RADIX_ASSIGN_OR_RETURN(config, BuildConfig(options, src));
  config.hidden_states_only = hidden_states_only;
  if (options.tensor_shard.sharded() && hidden_states_only) {
    return Unsupported("--tp-size " + std::to_string(options.tensor_shard.size) +
                       ": embedding and classification models run with --tp-size 1 only");
  }
  if (options.pipeline_stage.split() && hidden_states_only) {
    return Unsupported("--pp-size " + std::to_string(options.pipeline_stage.size) +
                       ": embedding and classification models run with --pp-size 1 only");
  }
  config.tensor_shard = options.tensor_shard;
  config.pipeline_stage = options.pipeline_stage;
  config.expert_placement = options.expert_placement;
  if (options.load_mtp && config.nextn_layers == 0) {
    return InvalidArgument(options.model_path + ": " + config.architecture +
                           " has no multi-token-prediction block (num_nextn_predict_layers; "
                           "GGUF nextn_predict_layers) for a NEXTN draft");
  }
  config.load_mtp = options.load_mtp;
  LoadedDecoder out;
  out.folder = cp.kind == Checkpoint::Kind::kHf ? cp.folder : "";
  if (cp.kind == Checkpoint::Kind::kHf) out.config_json = src.config;
  std::unique_ptr<WeightStore> weights;
  if (options.load_format == "dummy") {
    kernels::WeightFormat format;
    RADIX_ASSIGN_OR_RETURN(format, DummyFormat(options.dtype));
    weights = WeightStore::Dummy(options.random_seed, format);
  } else if (cp.kind == Checkpoint::Kind::kGguf) {
    RADIX_ASSIGN_OR_RETURN(weights, WeightStore::FromGguf(std::move(*src.gguf)));
    weights->set_activation_mode(options.exact_quantized_activations
                                     ? kernels::ActivationMode::kExact
                                     : kernels::ActivationMode::kGgmlRounded);
  } else {
    std::vector<SafetensorsFile> files;
    RADIX_ASSIGN_OR_RETURN(files, OpenSafetensors(cp.folder, !options.disable_mmap));
    RADIX_ASSIGN_OR_RETURN(weights,
                           WeightStore::FromSafetensors(std::move(files), config.model_type));
  }
  if (options.load_format != "dummy") weights->set_matrix_storage(DtypeFormat(options.dtype));
  if (options.dtype == "half" || options.dtype == "float16" || options.dtype == "bfloat16") {
    RADIX_LOG_WARN(
        "--dtype {}: activations stay float32 on cpu; --dtype sets the storage of the "
        "unquantized weight matrices",
        options.dtype);
  }
  // Dummy stores have no tensor list; count the tensors a Llama-shaped model asks for.
  const int64_t expected =
      weights->tensor_count() > 0 ? weights->tensor_count() : config.num_layers * 9 + 3;
  LoadProgress progress("Loading weights", expected);
  weights->set_progress(&progress);
  WeightStore* store = weights.get();
  std::unique_ptr<CausalLM> model;
  RADIX_ASSIGN_OR_RETURN(model, BuildModel(std::move(config), std::move(weights)));
  progress.Finish();
  store->set_progress(nullptr);
  if (DtypeFormat(options.dtype) && options.load_format != "dummy") {
    RADIX_LOG_INFO(
        "--dtype {}: {} weight matrices converted; {} block-quantized matrices keep "
        "their format (--dtype only affects unquantized tensors)",
        options.dtype, store->converted_matrices(), store->kept_quantized_matrices());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const ModelConfig& c = model->config();
  RADIX_LOG_INFO(
      "Load weight end. arch={}, params={:.2f}M, weight bytes={:.2f} MB, load time={:.2f} s",
      c.architecture, static_cast<double>(c.ParameterCount()) / 1e6,
      static_cast<double>(model->weight_bytes()) / (1 << 20), seconds);
  out.model = std::move(model);
  out.store = store;
  return out;
}

}  // namespace

Expected<std::unique_ptr<CausalLM>> LoadModel(const LoadOptions& options) {
  LoadedDecoder loaded;
  RADIX_ASSIGN_OR_RETURN(loaded, LoadDecoder(options, /*hidden_states_only=*/false));
  return std::move(loaded.model);
}

bool IsClassifierArchitecture(std::string_view architecture) {
  return EndsWith(architecture, "ForSequenceClassification") &&
         !IsEncoderArchitecture(architecture);
}

bool IsPoolingDecoderArchitecture(std::string_view architecture) {
  return !IsEncoderArchitecture(architecture) &&
         (IsClassifierArchitecture(architecture) || EndsWith(architecture, "Model"));
}

Expected<std::unique_ptr<EncoderModel>> LoadPoolingDecoder(const LoadOptions& options) {
  LoadedDecoder loaded;
  RADIX_ASSIGN_OR_RETURN(loaded, LoadDecoder(options, /*hidden_states_only=*/true));
  const ModelConfig& c = loaded.model->config();
  std::unique_ptr<ClassifierHead> head;
  PoolingConfig pooling{.mode = PoolingMode::kLastToken, .normalize = true};
  if (IsClassifierArchitecture(c.architecture)) {
    head = std::make_unique<ClassifierHead>();
    RADIX_ASSIGN_OR_RETURN(head->info, ReadClassifierInfo(loaded.config_json, options.model_path));
    const auto n = static_cast<int64_t>(head->info.labels.size());
    kernels::WeightMatrix weight;
    RADIX_ASSIGN_OR_RETURN(weight,
                           loaded.store->RequireMatrix("cls_score.weight", n, c.hidden_size));
    head->weight.resize(static_cast<size_t>(n * c.hidden_size));
    for (int64_t k = 0; k < n; ++k) {
      kernels::DequantizeRow(weight, k, head->weight.data() + k * c.hidden_size);
    }
    if (loaded.store->Find("cls_score.bias") != nullptr) {
      RADIX_ASSIGN_OR_RETURN(head->bias, loaded.store->RequireVector("cls_score.bias", n));
    }
  } else if (!loaded.folder.empty()) {
    RADIX_ASSIGN_OR_RETURN(pooling, LoadPoolingConfig(loaded.folder, pooling));
  }
  auto pooler = std::make_unique<DecoderPooler>(std::move(loaded.model), pooling, std::move(head));
  const std::vector<std::string>& labels = pooler->classifier().labels;
  if (labels.empty()) {
    RADIX_LOG_INFO("Serving {} as an embedding model: pooling={}{}, {} dimensions",
                   pooler->config().architecture, PoolingModeName(pooler->pooling().mode),
                   pooler->pooling().normalize ? " + normalize" : "", pooler->embedding_dim());
  } else {
    RADIX_LOG_INFO("Serving {} as a classifier: last-token pooling, {} labels",
                   pooler->config().architecture, labels.size());
  }
  return std::unique_ptr<EncoderModel>(std::move(pooler));
}

}  // namespace radixserve::model

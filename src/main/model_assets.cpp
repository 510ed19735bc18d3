#include "main/model_assets.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "chat/chat_template_loader.h"
#include "common/log.h"
#include "main/expert_placement_args.h"
#include "model/model_loader.h"
#include "sampling/sampling_defaults.h"
#include "tokenizer/gguf_metadata.h"
#include "tokenizer/tokenizer_loader.h"

namespace radixserve {
namespace {

namespace fs = std::filesystem;

bool IsGguf(const std::string& path) {
  return fs::is_regular_file(path) && path.size() > 5 &&
         path.compare(path.size() - 5, 5, ".gguf") == 0;
}

// A GGUF model path may also be a folder holding one .gguf file.
std::string ResolveGgufPath(const std::string& path) {
  if (!fs::is_directory(path)) return path;
  for (const auto& entry : fs::directory_iterator(path)) {
    if (entry.path().extension() == ".gguf") return entry.path().string();
  }
  return path;
}

Expected<std::unique_ptr<chat::ChatTemplate>> LoadTemplate(const args::ServerArgs& args,
                                                           const std::string& tokenizer_path) {
  std::string chat_arg = args.GetOptionalString(args::key::kChatTemplate).value_or("");
  std::string config_path;
  std::optional<std::string> gguf_template;
  if (IsGguf(tokenizer_path)) {
    RADIX_ASSIGN_OR_RETURN(auto meta, tokenizer::GgufMetadata::Read(tokenizer_path));
    gguf_template = meta.GetString("tokenizer.chat_template");
  } else {
    fs::path candidate = fs::path(tokenizer_path) / "tokenizer_config.json";
    if (fs::exists(candidate)) config_path = candidate.string();
  }
  if (chat_arg.empty() && config_path.empty() && !gguf_template)
    return std::unique_ptr<chat::ChatTemplate>();
  auto loaded = chat::LoadChatTemplate(chat_arg, config_path, {}, gguf_template);
  if (!loaded.ok()) {
    // A model without a template still serves /generate and /v1/completions.
    if (chat_arg.empty() && loaded.status().code() == StatusCode::kNotFound)
      return std::unique_ptr<chat::ChatTemplate>();
    return loaded.status();
  }
  return std::make_unique<chat::ChatTemplate>(std::move(loaded).value());
}

nlohmann::json GenerationDefaults(const model::ModelConfig& config, const args::ServerArgs& args) {
  nlohmann::json generation = nlohmann::json::object();
  if (config.temperature) generation["temperature"] = *config.temperature;
  if (config.top_p) generation["top_p"] = *config.top_p;
  if (config.top_k) generation["top_k"] = *config.top_k;
  if (config.repetition_penalty) generation["repetition_penalty"] = *config.repetition_penalty;
  auto source = sampling::ParseSamplingDefaultsSource(args.GetString(args::key::kSamplingDefaults));
  if (!source.ok()) return nlohmann::json::object();
  auto defaults = sampling::ModelSamplingDefaults(generation, *source);
  return defaults.ok() && defaults->is_object() ? *defaults : nlohmann::json::object();
}

// config.json's Matryoshka declaration (SGLang's model_config: matryoshka_dimensions, or
// is_matryoshka for any width). A GGUF file declares none.
Status ReadMatryoshka(const std::string& model_path, api::ModelFacts& facts) {
  const std::filesystem::path config = std::filesystem::path(model_path) / "config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(config, ec)) return Status::Ok();
  std::ifstream in(config);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::Ok();  // the loader has already read (and checked) it
  if (auto dims = j.find("matryoshka_dimensions"); dims != j.end() && !dims->is_null()) {
    if (!dims->is_array() || dims->empty()) {
      return DataLoss(config.string() + ": matryoshka_dimensions must be a list of widths");
    }
    for (const nlohmann::json& d : *dims) {
      if (!d.is_number_integer() || d.get<int64_t>() < 1) {
        return DataLoss(config.string() + ": matryoshka_dimensions must be positive integers");
      }
      facts.matryoshka_dimensions.push_back(d.get<int64_t>());
    }
    facts.is_matryoshka = true;
  }
  if (auto flag = j.find("is_matryoshka"); flag != j.end() && flag->is_boolean()) {
    facts.is_matryoshka = facts.is_matryoshka || flag->get<bool>();
  }
  return Status::Ok();
}

// STANDALONE's draft model. Its tokenizer (when it has one) must name every token as the
// target's does: drafts are token ids the target verifies.
Status LoadDraftModel(const args::ServerArgs& args, const model::ModelConfig& target,
                      const tokenizer::Tokenizer* target_tokenizer, ModelAssets& assets) {
  const std::string path = args.GetString(args::key::kSpeculativeDraftModelPath);
  model::LoadOptions options = ModelLoadOptions(args, path);
  options.context_length = target.context_length;
  // --load-format was resolved from the target's files (gguf / safetensors); the draft's own
  // files decide for it, except for random (dummy) weights.
  if (options.load_format != "dummy") options.load_format = "auto";
  auto draft = model::LoadModel(options);
  if (!draft.ok()) {
    return InvalidArgument("argument --speculative-draft-model-path: " + draft.status().message());
  }
  const model::ModelConfig& dc = (*draft)->config();
  RADIX_LOG_INFO("Draft model {}: {} layers, hidden {}, vocab {}, {:.2f} GB of weights", path,
                 dc.num_layers, dc.hidden_size, dc.vocab_size,
                 static_cast<double>((*draft)->weight_bytes()) / (1 << 30));
  if (target_tokenizer != nullptr) {
    auto tokenizer = tokenizer::LoadTokenizer(options.model_path);
    if (!tokenizer.ok()) {
      RADIX_LOG_WARN(
          "Draft model {}: no tokenizer to compare with the target's ({}); its "
          "vocabulary size matches",
          path, tokenizer.status().message());
    } else {
      const size_t n = std::min((*tokenizer)->vocab_size(), target_tokenizer->vocab_size());
      for (size_t id = 0; id < n; ++id) {
        const auto token = static_cast<tokenizer::TokenId>(id);
        const std::string* a = target_tokenizer->IdToToken(token);
        const std::string* b = (*tokenizer)->IdToToken(token);
        if ((a == nullptr) != (b == nullptr) || (a != nullptr && *a != *b)) {
          return InvalidArgument(fmt::format(
              "argument --speculative-draft-model-path: the draft model's tokenizer differs from "
              "the target's at token {} ('{}' vs '{}'); STANDALONE needs the same vocabulary",
              id, b != nullptr ? *b : "", a != nullptr ? *a : ""));
        }
      }
    }
  }
  assets.draft_model = std::shared_ptr<const model::CausalLM>(std::move(draft).value());
  return Status::Ok();
}

}  // namespace

model::LoadOptions ModelLoadOptions(const args::ServerArgs& args, const std::string& model_path) {
  model::LoadOptions options;
  options.model_path = ResolveGgufPath(model_path);
  options.load_format = args.GetString(args::key::kLoadFormat);
  options.dtype = args.GetString(args::key::kDtype);
  options.context_length = args.GetOptionalInt(args::key::kContextLength).value_or(0);
  const nlohmann::json& overrides = args.Get(args::key::kJsonModelOverrideArgs);
  if (overrides.is_object() && !overrides.empty()) options.json_override = overrides.dump();
  options.random_seed = static_cast<uint64_t>(args.GetInt(args::key::kRandomSeed));
  options.disable_mmap = args.GetBool(args::key::kWeightLoaderDisableMmap);
  return options;
}

Expected<ModelAssets> LoadModelAssets(const args::ServerArgs& args, const model::TensorShard& shard,
                                      const model::PipelineStage& stage) {
  ModelAssets assets;
  model::LoadOptions options = ModelLoadOptions(args, args.GetString(args::key::kModelPath));
  options.tensor_shard = shard;
  options.pipeline_stage = stage;
  RADIX_ASSIGN_OR_RETURN(options.expert_placement, ExpertPlacementFromArgs(args));
  options.load_mtp = args.GetOptionalString(args::key::kSpeculativeAlgorithm) == "NEXTN";

  model::ModelConfig config;
  RADIX_ASSIGN_OR_RETURN(config, model::LoadModelConfig(options));
  const bool encoder = model::IsEncoderArchitecture(config.architecture);
  // Decoders that pool (--is-embedding on a *ForCausalLM, classifiers, headless embedders).
  const bool pooling_decoder =
      !encoder && (args.GetBool(args::key::kIsEmbedding) ||
                   model::IsPoolingDecoderArchitecture(config.architecture));
  if ((shard.sharded() || stage.split()) && (pooling_decoder || encoder)) {
    return InvalidArgument(std::string("argument ") +
                           (shard.sharded() ? "--tp-size: " : "--pp-size: ") + config.architecture +
                           " serves embeddings; embedding models run with --tp-size 1 and "
                           "--pp-size 1 only");
  }
  if (pooling_decoder) {
    RADIX_ASSIGN_OR_RETURN(auto model, model::LoadPoolingDecoder(options));
    assets.encoder = std::shared_ptr<const model::EncoderModel>(std::move(model));
    config = assets.encoder->config();
  } else if (encoder) {
    RADIX_ASSIGN_OR_RETURN(auto model, model::LoadEncoderModel(options));
    assets.encoder = std::shared_ptr<const model::EncoderModel>(std::move(model));
    config = assets.encoder->config();
  } else {
    auto model = model::LoadModel(options);
    if (!model.ok() && options.load_mtp) {
      return InvalidArgument("argument --speculative-algorithm: NEXTN: " +
                             model.status().message());
    }
    RADIX_RETURN_IF_ERROR(model.status());
    assets.model = std::shared_ptr<const model::CausalLM>(std::move(model).value());
    config = assets.model->config();
  }

  if (!args.GetBool(args::key::kSkipTokenizerInit)) {
    std::string tokenizer_path = args.GetString(args::key::kTokenizerPath);
    if (tokenizer_path == args.GetString(args::key::kModelPath)) {
      tokenizer_path = options.model_path;
    }
    RADIX_ASSIGN_OR_RETURN(auto tokenizer, tokenizer::LoadTokenizer(tokenizer_path));
    assets.tokenizer = std::shared_ptr<const tokenizer::Tokenizer>(std::move(tokenizer));
    RADIX_ASSIGN_OR_RETURN(assets.chat_template, LoadTemplate(args, tokenizer_path));
  }

  if (assets.model != nullptr && !args.IsNull(args::key::kSpeculativeAlgorithm) &&
      args.GetString(args::key::kSpeculativeAlgorithm) == "STANDALONE") {
    RADIX_RETURN_IF_ERROR(LoadDraftModel(args, config, assets.tokenizer.get(), assets));
  }

  assets.facts.model_type = config.model_type;
  assets.facts.architectures = {config.architecture};
  assets.facts.context_len = config.context_length;
  assets.facts.vocab_size = config.vocab_size;
  assets.facts.generation_defaults = GenerationDefaults(config, args);
  assets.facts.is_generation = assets.encoder == nullptr;
  if (assets.encoder != nullptr) {
    assets.facts.normalized_embeddings =
        assets.encoder->pooling().normalize && assets.encoder->classifier().labels.empty();
    assets.facts.embedding_dim = assets.encoder->embedding_dim();
    RADIX_RETURN_IF_ERROR(ReadMatryoshka(options.model_path, assets.facts));
    assets.facts.labels = assets.encoder->classifier().labels;
    assets.facts.sigmoid_scores =
        assets.encoder->classifier().activation == model::ScoreActivation::kSigmoid;
  }
  if (args.GetBool(args::key::kUseRewardModel) && assets.facts.labels.size() != 1) {
    return InvalidArgument("argument --use_reward_model: " + config.architecture +
                           " is not a reward model (it needs a *ForSequenceClassification "
                           "checkpoint with one label, num_labels = 1)");
  }
  return assets;
}

}  // namespace radixserve

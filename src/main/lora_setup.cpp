#include "main/lora_setup.h"

#include <string>
#include <vector>

namespace radixserve {
namespace {

std::vector<std::string> StringList(const args::ServerArgs& args, args::ArgKey name) {
  std::vector<std::string> out;
  const nlohmann::json& value = args.Get(name);
  if (value.is_array()) {
    for (const nlohmann::json& item : value) out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace

Expected<std::unique_ptr<engine::LoraRegistry>> CreateLoraRegistry(
    const args::ServerArgs& args, std::shared_ptr<const model::CausalLM> model) {
  const std::vector<std::string> paths = StringList(args, args::key::kLoraPaths);
  const nlohmann::json& enable = args.Get(args::key::kEnableLora);
  if (!(enable.is_boolean() && enable.get<bool>()) && paths.empty()) {
    return std::unique_ptr<engine::LoraRegistry>();
  }
  if (model == nullptr) {
    return InvalidArgument(
        "argument --enable-lora: LoRA adapters need a generation model, not an "
        "embedding server");
  }
  engine::LoraRegistryOptions options;
  const int64_t per_batch = args.GetInt(args::key::kMaxLorasPerBatch);
  if (auto max_loaded = args.GetOptionalInt(args::key::kMaxLoadedLoras)) {
    if (*max_loaded < per_batch) {
      return InvalidArgument(
          "argument --max-loaded-loras: must be at least --max-loras-per-batch (" +
          std::to_string(per_batch) + "), got " + std::to_string(*max_loaded));
    }
    options.max_loaded = *max_loaded;
  }
  options.evict_fifo = args.GetString(args::key::kLoraEvictionPolicy) == "fifo";
  options.max_bytes = args.GetOptionalInt(args::key::kMaxLoraModelSize).value_or(-1);
  if (auto rank = args.GetOptionalInt(args::key::kMaxLoraRank)) {
    if (*rank < 1) return InvalidArgument("argument --max-lora-rank: must be at least 1");
    options.load.max_rank = *rank;
  }
  auto targets = engine::ParseLoraTargets(StringList(args, args::key::kLoraTargetModules));
  if (!targets.ok())
    return InvalidArgument("argument --lora-target-modules: " + targets.status().message());
  options.load.allowed_targets = *targets;
  auto registry = std::make_unique<engine::LoraRegistry>(model, std::move(options));
  for (const std::string& text : paths) {
    auto spec = engine::ParseLoraPathSpec(text);
    if (!spec.ok()) return InvalidArgument("argument --lora-paths: " + spec.status().message());
    Status loaded = registry->Load(spec->name, spec->path, spec->pinned);
    if (!loaded.ok()) return InvalidArgument("argument --lora-paths: " + loaded.message());
  }
  return registry;
}

}  // namespace radixserve

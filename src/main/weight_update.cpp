#include "main/weight_update.h"

#include <malloc.h>

#include <utility>

#include <fmt/format.h>

#include "main/expert_placement_args.h"
#include "main/model_assets.h"
#include "model/model_loader.h"

namespace radixserve {

Expected<std::shared_ptr<const model::CausalLM>> ServerWeightLoader::Load(
    const std::string& path, const std::string& load_format) {
  if (config_.tensor_shard.sharded() || config_.pipeline_stage.split()) {
    return Unsupported("updating weights is supported with --tp-size 1 and --pp-size 1 only");
  }
  model::LoadOptions options = ModelLoadOptions(args_, path);
  if (!load_format.empty()) options.load_format = load_format;
  // The same slots as the served model (the expert recorder counts them).
  RADIX_ASSIGN_OR_RETURN(options.expert_placement, ExpertPlacementFromArgs(args_));
  const model::ModelConfig& was = config_;
  // Cheap first: the config alone, before reading any weights.
  RADIX_ASSIGN_OR_RETURN(model::ModelConfig config, model::LoadModelConfig(options));
  const auto same = [&](const model::ModelConfig& c) -> Status {
    const std::string why =
        c.architecture != was.architecture
            ? "architecture " + c.architecture + " != " + was.architecture
        : c.hidden_size != was.hidden_size
            ? fmt::format("hidden_size {} != {}", c.hidden_size, was.hidden_size)
        : c.intermediate_size != was.intermediate_size
            ? fmt::format("intermediate_size {} != {}", c.intermediate_size, was.intermediate_size)
        : c.num_layers != was.num_layers
            ? fmt::format("num_hidden_layers {} != {}", c.num_layers, was.num_layers)
        : c.num_heads != was.num_heads || c.num_kv_heads != was.num_kv_heads ||
                c.head_dim != was.head_dim
            ? fmt::format("attention heads {}x{} / {} kv != {}x{} / {} kv", c.num_heads, c.head_dim,
                          c.num_kv_heads, was.num_heads, was.head_dim, was.num_kv_heads)
        : c.vocab_size != was.vocab_size
            ? fmt::format("vocab_size {} != {}", c.vocab_size, was.vocab_size)
        : c.context_length != was.context_length
            ? fmt::format("context length {} != {}", c.context_length, was.context_length)
            : "";
    if (why.empty()) return Status::Ok();
    return InvalidArgument(path + " does not have the served model's shape (" + why +
                           "); a weight update keeps the architecture.");
  };
  RADIX_RETURN_IF_ERROR(same(config));
  RADIX_ASSIGN_OR_RETURN(std::unique_ptr<model::CausalLM> loaded, model::LoadModel(options));
  RADIX_RETURN_IF_ERROR(same(loaded->config()));
  return std::shared_ptr<const model::CausalLM>(std::move(loaded));
}

Expected<std::shared_ptr<const model::CausalLM>> ServerWeightLoader::Reload() {
  std::string path, load_format;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    path = path_;
    load_format = load_format_;
  }
  return Load(path, load_format);
}

void ServerWeightLoader::Adopt(std::shared_ptr<const model::CausalLM> model,
                               const std::string& path, const std::string& load_format) {
  if (lora_ != nullptr) lora_->SetModel(model);
  std::shared_ptr<const model::CausalLM> old;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    old = std::exchange(model_, std::move(model));
    path_ = path;
    load_format_ = load_format;
  }
  // `old` is freed here unless a request or an adapter load still holds it.
}

void ServerWeightLoader::Restore(std::shared_ptr<const model::CausalLM> model) {
  if (lora_ != nullptr) lora_->SetModel(model);
  std::lock_guard<std::mutex> lock(mutex_);
  model_ = std::move(model);
}

void ServerWeightLoader::Release() {
  if (lora_ != nullptr) lora_->SetModel(nullptr);
  std::shared_ptr<const model::CausalLM> old;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    old = std::exchange(model_, nullptr);
  }
  old.reset();
  // Packed weights are mostly heap blocks, which glibc keeps for reuse once freed: hand the free
  // pages back to the OS, which is what the release is for.
  malloc_trim(0);
}

}  // namespace radixserve

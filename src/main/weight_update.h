// ServerWeightLoader: main's side of /update_weights_from_disk (api::WeightLoader). It reads a
// checkpoint with the server's own load options (ModelLoadOptions), refuses one whose
// architecture or shapes differ from the served model's (the KV pool, the tokenizer and the LoRA
// adapters were sized for those), and, once the engine serves the new model, holds it in place
// of the old one (which is then freed) and points the LoRA registry at it. For
// /release_memory_occupation it drops the model (Release) and reads the same checkpoint again
// (Reload) on resume.
//
// Thread-safe: Load and Reload run on the admin queue, Adopt and Release on an engine thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "api/server_context.h"
#include "args/server_args.h"
#include "engine/lora_registry.h"
#include "model/causal_lm.h"

namespace radixserve {

class ServerWeightLoader final : public api::WeightLoader {
 public:
  // `lora` may be null (no LoRA); it must outlive the loader.
  ServerWeightLoader(const args::ServerArgs& args, std::shared_ptr<const model::CausalLM> model,
                     engine::LoraRegistry* lora)
      : args_(args),
        config_(model->config()),
        model_(std::move(model)),
        lora_(lora),
        path_(args.GetString(args::key::kModelPath)),
        releases_weights_(args.GetBool(args::key::kEnableMemorySaver)) {}

  Expected<std::shared_ptr<const model::CausalLM>> Load(const std::string& path,
                                                        const std::string& load_format) override;
  Expected<std::shared_ptr<const model::CausalLM>> Reload() override;
  void Adopt(std::shared_ptr<const model::CausalLM> model, const std::string& path,
             const std::string& load_format) override;
  void Restore(std::shared_ptr<const model::CausalLM> model) override;
  void Release() override;
  bool ReleasesWeights() const override { return releases_weights_; }
  std::shared_ptr<const model::CausalLM> Current() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return model_;
  }

 private:
  const args::ServerArgs& args_;
  const model::ModelConfig config_;  // the served shape every checkpoint must have
  std::mutex mutex_;
  // The served model (null while released) and where it was read from; guarded by mutex_.
  std::shared_ptr<const model::CausalLM> model_;
  engine::LoraRegistry* lora_;
  std::string path_;
  std::string load_format_;  // empty: the server's --load-format
  const bool releases_weights_;
};

}  // namespace radixserve

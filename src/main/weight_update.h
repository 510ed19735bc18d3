// ServerWeightLoader: main's side of /update_weights_from_disk (api::WeightLoader). It reads a
// checkpoint with the server's own load options (ModelLoadOptions), refuses one whose
// architecture or shapes differ from the served model's (the KV pool, the tokenizer and the LoRA
// adapters were sized for those), and, once the engine serves the new model, holds it in place
// of the old one (which is then freed) and points the LoRA registry at it.
//
// Thread-safe: Load runs on the admin queue, Adopt on an engine thread.
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
      : args_(args), model_(std::move(model)), lora_(lora) {}

  Expected<std::shared_ptr<const model::CausalLM>> Load(const std::string& path,
                                                        const std::string& load_format) override;
  void Adopt(std::shared_ptr<const model::CausalLM> model) override;
  std::shared_ptr<const model::CausalLM> Current() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return model_;
  }

 private:
  const args::ServerArgs& args_;
  std::mutex mutex_;
  std::shared_ptr<const model::CausalLM> model_;  // the served model; guarded by mutex_
  engine::LoraRegistry* lora_;
};

}  // namespace radixserve

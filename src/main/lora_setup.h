// CreateLoraRegistry: the LoRA adapter registry the server arguments ask for, with the
// --lora-paths adapters loaded. Null (and Ok) when neither --enable-lora nor --lora-paths is
// given. Errors start with "argument --X:" (main exits with status 2): a bad --lora-paths entry
// or adapter, --max-loaded-loras below --max-loras-per-batch, LoRA on an embedding server.
#pragma once

#include <memory>

#include "args/server_args.h"
#include "common/status.h"
#include "engine/lora_registry.h"
#include "model/causal_lm.h"

namespace radixserve {

Expected<std::unique_ptr<engine::LoraRegistry>> CreateLoraRegistry(
    const args::ServerArgs& args, std::shared_ptr<const model::CausalLM> model);

}  // namespace radixserve

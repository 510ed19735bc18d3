// LoRA adapter routes, with SGLang's bodies and answers:
//   POST /load_lora_adapter   {"lora_name", "lora_path", "pinned"?}
//   POST /unload_lora_adapter {"lora_name"}
// Both answer {"success", "error_message", "loaded_adapters": {name: path}}, 200 on success and
// 400 otherwise (LoRA off, a bad body, an unknown name, an adapter that does not load). Loading
// reads and converts the files on ctx.lora_queue, not on the I/O thread. /v1/models lists each
// loaded adapter as "<served name>:<adapter>" (LoraModelCards).
#pragma once

#include <nlohmann/json.hpp>

#include "api/routes.h"

namespace radixserve::api {

void HandleLoadLoraAdapter(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
void HandleUnloadLoraAdapter(ServerContext& ctx, const ApiRequest& request,
                             ResponseWriterPtr writer);

// One OpenAI model card per loaded adapter (none when LoRA is off).
nlohmann::json LoraModelCards(const ServerContext& ctx);

}  // namespace radixserve::api

// The native generation route: POST /generate (SGLang's GenerateReqInput). Single or batch
// prompts as text or token ids, per-item sampling params, n parallel samples, streaming with
// cumulative text, logprobs in meta_info.
#pragma once

#include <string>

#include "api/response_writer.h"
#include "api/server_context.h"

namespace radixserve::api {

void HandleGenerate(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer);

}  // namespace radixserve::api

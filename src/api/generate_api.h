// The native generation route: POST /generate (SGLang's GenerateReqInput). Single or batch
// prompts as text or token ids, per-item sampling params, n parallel samples, streaming with
// cumulative text, logprobs in meta_info.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/response_writer.h"
#include "api/server_context.h"
#include "api/serving.h"

namespace radixserve::api {

// SGLang's meta_info of one finished or streaming choice: id, finish_reason, token counts,
// cached tokens (by tier with a storage tier), weight version, latency, and the logprobs,
// entropy and hidden states `shape` asked for. Chat completions' return_meta_info answers it too.
nlohmann::json MetaInfoJson(const ServerContext& ctx, const ChoiceState& choice,
                            const engine::GenerateRequest& shape);

// The parse step of /generate (serving.h): the body's engine requests and their formatter, or the
// 400 to answer.
ApiExpected<ServingPlan> ParseGenerate(ServerContext& ctx, const nlohmann::json& body);

// POST /generate: SGLang's GenerateReqInput, or LightLLM's {"inputs", "parameters"} body
// (lightllm_api.h).

void HandleGenerate(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer);

}  // namespace radixserve::api

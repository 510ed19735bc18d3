// SGLang's native parsing routes, which run a parser over text the client sends (no generation):
// POST /parse_function_call {"text", "tool_call_parser", "tools"} -> {"normal_text", "calls":
// [{"tool_index", "name", "parameters"}]} and POST /separate_reasoning {"text",
// "reasoning_parser"} -> {"text", "reasoning_text"}. An unknown parser name or a malformed field
// is a 400 naming it.
#pragma once

#include "api/routes.h"

namespace radixserve::api {

void HandleParseFunctionCall(ServerContext& ctx, const ApiRequest& request,
                             ResponseWriterPtr writer);
void HandleSeparateReasoning(ServerContext& ctx, const ApiRequest& request,
                             ResponseWriterPtr writer);

}  // namespace radixserve::api

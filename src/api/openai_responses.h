// OpenAI's Responses API over the chat path: POST /v1/responses (text in and out, function tools,
// reasoning items from --reasoning-parser, JSON-schema output via `text.format`, streaming as
// OpenAI's typed events, previous_response_id over the in-memory ResponseStore), GET and DELETE
// /v1/responses/{id}, and POST /v1/responses/{id}/cancel (answered as OpenAI answers it for a
// response that did not run in the background).
//
// A request is translated into a chat request (instructions become the system turn; input items
// become messages: function_call items assistant tool calls, function_call_output items tool
// turns) and parsed by ParseChatCall, so sampling, templates, tool parsing and constraints are
// the chat route's. Fields that cannot take effect here (background, conversation, prompt,
// non-function tools, encrypted reasoning, truncation "auto", ...) answer 400 naming the field;
// fields OpenAI does not define answer 400 too, except SGLang's sampling extras (top_k, min_p,
// repetition_penalty, stop, seed, request_id, priority, ...), which act as on the chat route.
#pragma once

#include <string>
#include <string_view>

#include "api/api_error.h"
#include "api/response_writer.h"
#include "api/routes.h"
#include "api/server_context.h"
#include "api/serving.h"

namespace radixserve::api {

ApiExpected<ServingPlan> ParseResponses(ServerContext& ctx, std::string_view body);

void HandleResponses(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer);

// The routes under /v1/responses/ (request.path_param is the rest of the path: "{id}" or
// "{id}/cancel").
void HandleResponseById(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);

}  // namespace radixserve::api

// The OpenAI-compatible generation routes: POST /v1/chat/completions and POST /v1/completions,
// with SGLang's extensions (top_k, min_p, repetition_penalty, min_tokens, stop_token_ids,
// ignore_eos, chat_template_kwargs, rid, priority, ...), streaming as OpenAI chunks, usage with
// cached tokens under --enable-cache-report, logprobs in OpenAI's shapes.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/chat_output.h"
#include "api/response_writer.h"
#include "api/server_context.h"
#include "api/serving.h"

namespace radixserve::api {

// The parse steps (serving.h): the body's engine requests and their formatter, or the error.
ApiExpected<ServingPlan> ParseChatCompletions(ServerContext& ctx, std::string_view body);
ApiExpected<ServingPlan> ParseCompletions(ServerContext& ctx, std::string_view body);

// A parsed chat request before its answer's shape is chosen: /v1/chat/completions formats it as
// chat.completion objects, /v1/responses as Response objects.
struct ChatCall {
  ServingPlan plan;  // requests, group, stream; no formatter yet
  std::unique_ptr<ChatOutput> output;
  std::string model;
  bool logprobs = false;
  bool include_usage = false;
  bool hidden_states = false;  // return_hidden_states
  bool return_token_ids = false;
  bool return_cached_tokens_details = false;
};
// `body` is the request with its key order kept (templates see tools in the client's order).
ApiExpected<ChatCall> ParseChatCall(ServerContext& ctx, const nlohmann::ordered_json& body);

void HandleChatCompletions(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer);
void HandleCompletions(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer);

}  // namespace radixserve::api

// Pieces shared by the OpenAI-compatible routes: field readers that turn type mistakes into
// 400s, the sampling-params mapping, usage and logprob shapes, finish reasons.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/call_tracker.h"
#include "api/response_writer.h"
#include "api/server_context.h"

namespace radixserve::api::openai {

using nlohmann::json;

// Thrown by the readers below on a wrong type; handlers catch it and answer 400 "Bad Request"
// (SGLang's shape for request-schema errors).
struct ValidationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown for a well-typed request the server refuses (SGLang's endpoint-level validation); handlers
// answer 400 "BadRequestError" with the message.
struct RequestError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Optional typed fields: missing or null -> nullopt; wrong type -> ValidationError.
std::optional<int64_t> OptInt(const json& body, const char* key);
std::optional<double> OptNumber(const json& body, const char* key);
std::optional<bool> OptBool(const json& body, const char* key);
std::optional<std::string> OptString(const json& body, const char* key);

// The prefix-cache namespace of a request: cache_salt followed by extra_key (SGLang), each an
// optional string.
std::string CacheNamespace(const json& body);

// `n` / `best_of`: 1 when absent; an integer in [1, --max-n] otherwise.
int64_t RequireN(const ServerContext& ctx, const json& body, const char* key);

// SGLang's sampling-params dict from the OpenAI fields both routes share (stop, penalties,
// top_k/min_p extras, logit_bias, seed, min_tokens, stop_token_ids, ignore_eos, stop_regex, the
// regex / ebnf / json_schema constraints, response_format, ...). Only the fields the request set
// are present, so server defaults can fill the rest. `ordered_body` is the same body parsed with
// its key order kept (schemas keep their property order).
json SamplingFromOpenAi(const json& body, const nlohmann::ordered_json& ordered_body);

// response_format: "text" adds nothing; "json_object" is the schema {"type": "object"};
// "json_schema" its json_schema.schema (RequestError "schema_ is required ..." without one);
// "structural_tag" the whole object as sampling_params.structural_tag; anything else a
// RequestError.
void ApplyResponseFormat(const nlohmann::ordered_json& body, json& sampling);

void SendError(ResponseWriter& writer, const ApiError& error);
void SendValidationError(ResponseWriter& writer, const std::string& message);

// "stop" | "length" | "abort" and the matched stop (string, token id or null).
std::string FinishReasonName(const ChoiceState& choice);
json MatchedStop(const ChoiceState& choice);

// usage: prompt tokens counted once per prompt (the first choice of each group of n),
// completion tokens summed; prompt_tokens_details only with --enable-cache-report and N > 0.
json Usage(const ServerContext& ctx, const std::vector<ChoiceState>& choices, size_t n);

// If a choice ended with an error status (an abort after admission), answers the call with it
// (an error event then [DONE] when streaming) and returns true.
bool AnswerFailedChoice(CallTracker& call, bool stream);

// The answer to a refused call: a plain error before its stream started, else an error event.
CallTracker::OnRejected RejectionAnswer(ResponseWriterPtr writer);

// The last streamed chunk before [DONE] when stream_options.include_usage is set: no choices,
// just the usage. `object` is the route's chunk object name.
json UsageChunk(const std::string& id, const char* object, int64_t created,
                const std::string& model, json usage);

// UTF-8 bytes of a token's text, for OpenAI's "bytes" fields.
json Bytes(const std::string& text);

int64_t NowSeconds();

}  // namespace radixserve::api::openai

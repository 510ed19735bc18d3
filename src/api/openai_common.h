// Pieces shared by the OpenAI-compatible routes: field readers that turn type mistakes into
// 400s, the sampling-params mapping, usage and logprob shapes, finish reasons.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/call_tracker.h"
#include "api/response_writer.h"
#include "api/server_context.h"

namespace radixserve::api::openai {

using nlohmann::json;

// Reads the typed fields of an OpenAI request without exceptions. A field of the wrong type makes
// the read yield nothing and records the failure (InvalidRequest, "Invalid value for 'k': ...");
// the first failure recorded is the one answered, so parsers check ok() before a value they read
// decides anything. Other refusals go in through Fail.
class FieldReader {
 public:
  // Optional fields of `object`: missing or null -> nullopt.
  std::optional<int64_t> Int(const json& object, const char* key);
  std::optional<double> Number(const json& object, const char* key);
  std::optional<bool> Bool(const json& object, const char* key);
  std::optional<std::string> String(const json& object, const char* key);

  // Records `error` unless an earlier failure was recorded.
  void Fail(ApiError error);
  bool ok() const { return !error_.has_value(); }
  const ApiError& error() const { return *error_; }

 private:
  std::optional<ApiError> error_;
};

// The fields both OpenAI generation routes read the same way.
struct OpenAiCommon {
  std::string model = "default";
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int64_t n = 1;
  std::optional<std::string> rid;  // absent: the server makes one (an empty one is refused)
  std::optional<int64_t> priority;
  std::string cache_namespace;  // cache_salt followed by extra_key (SGLang)
  // The LoRA adapter: "model": "<served name>:<adapter>" (or an adapter's own name) when LoRA is
  // on, else the lora_path extension field; nullopt: the base model.
  std::optional<engine::LoraRef> lora;
  // SGLang's return_hidden_states extension (needs --enable-return-hidden-states).
  bool return_hidden_states = false;
  // SGLang's return_token_ids: each choice's token ids (and, non-streamed, the prompt's).
  bool return_token_ids = false;
  // SGLang's return_cached_tokens_details: sglext.cached_tokens_details, the cached prompt tokens
  // by tier.
  bool return_cached_tokens_details = false;
  std::optional<int32_t> routed_dp_rank;  // routed_dp_rank / data_parallel_rank
  // SGLang's sampling-params dict from the OpenAI fields (stop, penalties, top_k/min_p extras,
  // logit_bias, seed, min_tokens, stop_token_ids, ignore_eos, stop_regex, the regex / ebnf /
  // json_schema constraints, response_format, ...): only the fields the request set, so server
  // defaults fill the rest.
  json sampling = json::object();
};

// Reads OpenAiCommon. `ordered` is the same body with its key order kept: schemas keep their
// property order, which is the order of the output's properties.
OpenAiCommon ReadOpenAiCommon(FieldReader& reader, const ServerContext& ctx, const json& body,
                              const nlohmann::ordered_json& ordered);

// The adapter an OpenAI "model" names when LoRA is on (SGLang's "<base>:<adapter>" form, or a
// loaded adapter's own name, as vLLM lists them); nullopt: the base model.
std::optional<std::string> AdapterOfModel(const ServerContext& ctx, const std::string& model);

// `n` / `best_of`: 1 when absent; an integer in [1, --max-n] otherwise.
int64_t ReadN(FieldReader& reader, const ServerContext& ctx, const json& body, const char* key);

// response_format: "text" adds nothing; "json_object" is the schema {"type": "object"};
// "json_schema" its json_schema.schema (BadRequest "schema_ is required ..." without one);
// "structural_tag" the whole object as sampling_params.structural_tag; anything else BadRequest.
void ApplyResponseFormat(FieldReader& reader, const nlohmann::ordered_json& body, json& sampling);

void SendError(ResponseWriter& writer, const ApiError& error);
void SendValidationError(ResponseWriter& writer, const std::string& message);

// "stop" | "length" | "abort" and the matched stop (string, token id or null).
std::string FinishReasonName(const ChoiceState& choice);
json MatchedStop(const ChoiceState& choice);
// SGLang's choice.hidden_states: the hidden state of the last output token fed back ([] when
// none was: at most one token generated).
json LastHiddenState(const ChoiceState& choice);

// usage: prompt tokens counted once per prompt (the first choice of each group of n),
// completion tokens summed; prompt_tokens_details only with --enable-cache-report and N > 0.
json Usage(const ServerContext& ctx, const std::vector<ChoiceState>& choices, size_t n);

// A non-streamed answer: {"id", "object", "created", "model", "choices", "usage", "metadata"}.
json Envelope(const ServerContext& ctx, const std::string& id, const char* object, int64_t created,
              const std::string& model, json choices, json usage);

// The last streamed chunk before [DONE] when stream_options.include_usage is set: no choices,
// just the usage. `object` is the route's chunk object name.
json UsageChunk(const std::string& id, const char* object, int64_t created,
                const std::string& model, json usage);

// A streamed chunk without choices carrying SGLang's response-level `sglext` object (sent after
// the finishing chunks, before the usage chunk). `object` is the route's chunk object name.
json SglextChunk(const std::string& id, const char* object, int64_t created,
                 const std::string& model, json sglext);

// SGLang's sglext.cached_tokens_details of the first choice: {"device", "host"} (+ "storage" and
// "storage_backend" with a storage tier); on a CPU the RAM pool is the device tier.
json CachedTokensDetails(const ChoiceState& choice);

// UTF-8 bytes of a token's text, for OpenAI's "bytes" fields.
json Bytes(const std::string& text);

int64_t NowSeconds();

}  // namespace radixserve::api::openai

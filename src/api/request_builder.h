// Turns the fields of a parsed API request into engine::GenerateRequests: tokenization, sampling
// defaults (--preferred-sampling-params; generation_config.json for chat), SamplingParams
// construction and SGLang's verify(), constraint compilation (grammars, stop regexes), logprob
// options, rid assignment.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/server_context.h"
#include "engine/request.h"

namespace radixserve::api {

// A prompt as text or as token ids (ids win when both are present, as in SGLang).
struct PromptInput {
  std::optional<std::string> text;
  std::optional<std::vector<int32_t>> ids;
};

struct BuildOptions {
  std::string rid;
  bool stream = false;
  std::optional<int64_t> priority;
  std::string extra_key;                // prefix-cache namespace (cache_salt + extra_key)
  std::optional<engine::LoraRef> lora;  // the adapter (ResolveLora); nullopt: the base model
  bool return_logprob = false;
  int64_t logprob_start_len = -1;
  int32_t top_logprobs_num = 0;
  std::vector<int32_t> token_ids_logprob;
  bool return_text_in_logprobs = false;
  bool return_hidden_states = false;  // checked against --enable-return-hidden-states
  bool return_entropy = false;
  bool add_special_tokens = true;        // when tokenizing text
  bool apply_model_defaults = false;     // generation_config.json defaults (chat completions)
  bool float_fields_are_floats = false;  // OpenAI routes (pydantic float semantics)
};

// The request, or a 400 ApiError with SGLang's message.
struct BuiltRequest {
  std::optional<engine::GenerateRequest> request;
  std::optional<ApiError> error;
};

BuiltRequest BuildGenerateRequest(const ServerContext& ctx, const PromptInput& prompt,
                                  const nlohmann::json& sampling_json, const BuildOptions& options);

// The adapter `name` (a request's lora_path, or the adapter part of an OpenAI model name)
// stands for: nullopt for no name; a 400 when LoRA is off (no --enable-lora / --lora-paths) or
// no adapter of that name is loaded.
Expected<std::optional<engine::LoraRef>> ResolveLora(const ServerContext& ctx,
                                                     const std::optional<std::string>& name);

// Attaches the request's constraint (json_schema, regex, ebnf or structural_tag) and compiles its
// stop_regex patterns into `request`. The grammar comes from ctx.grammar_cache; when
// ctx.grammar_queue is set and the cache misses, request.grammar stays null and
// CompileConstraint must run (on the queue) before the request is submitted. Errors (a 400 for
// the caller) name the field and the problem, or say why constrained decoding is off.
Status AttachConstraints(const ServerContext& ctx, engine::GenerateRequest& request);

// The grammar a request's sampling params ask for, if any.
std::optional<sampling::GrammarSpec> ConstraintSpec(const sampling::SamplingParams& params);

// Compiles (through ctx.grammar_cache, which must be set) the constraint of a request whose
// grammar is not attached yet; a no-op for requests without one. May take long: never on an
// I/O thread or the engine thread.
Status CompileConstraint(const ServerContext& ctx, engine::GenerateRequest& request);

// `n` (or best_of) of a request: an integer in [1, --max-n]; the error names the field and the
// limit. Checked before any copy of the request is made.
Expected<int64_t> CheckN(const nlohmann::json& value, const RequestLimits& limits,
                         const char* field = "n");

// The data-parallel replica a router chose for the request: routed_dp_rank, or its deprecated
// spelling data_parallel_rank (SGLang's), an integer in [0, --dp-size); nullopt when neither is
// set (the server's own --load-balance-method picks).
Expected<std::optional<int32_t>> ReadRoutedDpRank(const ServerContext& ctx,
                                                  const nlohmann::json& body);

// A fresh request id (hex), unique within this process.
std::string NewRid(ServerContext& ctx);

// Decodes a single token for logprob text / OpenAI token fields ("" without a tokenizer).
std::string TokenText(const ServerContext& ctx, int32_t token_id);

}  // namespace radixserve::api

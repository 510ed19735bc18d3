// LightLLM's generation API, served through the one serving path (serving.h):
//   POST /generate         {"inputs": text, "parameters": {...}, "multimodal_params": {}}
//   POST /generate_stream  the same, answered as Server-Sent Events (one per engine event, no
//                          "[DONE]" marker, as LightLLM streams)
//   POST /                 LightLLM's compat route: the body's "stream" picks one of the two.
// /generate carries SGLang's native API too; a body with "inputs" (and neither "text" nor
// "input_ids") is LightLLM's.
//
// `parameters` are LightLLM's SamplingParams: do_sample (false: greedy, LightLLM's default),
// temperature (below 1e-5: greedy), top_p, top_k (-1: all), presence/frequency/repetition
// penalties, max_new_tokens (16), min_new_tokens (1), stop_sequences (str | [str] | [[int]]),
// ignore_eos, skip_special_tokens, add_special_tokens, add_spaces_between_special_tokens,
// regular_constraint / guided_grammar / guided_json (regex / EBNF / JSON schema), n = best_of,
// return_details. LightLLM's features radixserve lacks (allowed_token_ids, input_penalty,
// exponential_decay_length_penalty, print_eos_token, PD fields, multimodal inputs) are accepted
// at their defaults and refused with a 400 naming them otherwise; unknown parameters are refused.
//
// With --use_tgi_api the same routes speak Text Generation Inference's API (what its official
// `text_generation` client sends and parses): GenerateParameters (details, decoder_input_details,
// stop, seed, best_of, return_full_text, grammar, ...), GenerateResponse / StreamResponse with
// TGI's finish reasons (length, eos_token, stop_sequence); POST / answers a one-item list as TGI
// does. (LightLLM's own TGI emulation answers LightLLM's finish reasons, which TGI's client
// refuses.)
//
// Errors answer {"message": ...} (LightLLM's error body) or, with --use_tgi_api, TGI's
// {"error": ..., "error_type": ...}, with the HTTP status of the failure.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/response_writer.h"
#include "api/server_context.h"
#include "api/serving.h"

namespace radixserve::api {

// Whether a /generate body is LightLLM's rather than SGLang's.
bool IsLightLlmBody(const nlohmann::json& body);

// The parse step of LightLLM's routes; `tgi`: --use_tgi_api; `list_answer`: TGI's POST /.
ApiExpected<ServingPlan> ParseLightLlm(ServerContext& ctx, const nlohmann::json& body, bool stream,
                                       bool tgi, bool list_answer);

// /generate with a LightLLM body (already parsed, "stream" taken out), /generate_stream, POST /.
void ServeLightLlm(ServerContext& ctx, const nlohmann::json& body, bool stream, bool list_answer,
                   ResponseWriterPtr writer);
void HandleLightLlmGenerateStream(ServerContext& ctx, const std::string& body,
                                  ResponseWriterPtr writer);
void HandleLightLlmCompat(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer);

}  // namespace radixserve::api

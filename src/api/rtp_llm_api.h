// RTP-LLM's native generation API (rtp_llm/frontend: FrontendServer.inference), served through
// the one serving path (serving.h):
//   POST /  {"prompt": text | [text], "prompt_batch": [text, ...], "generate_config": {...},
//            "yield_generator": bool, ...}
// POST / is shared with LightLLM's compat route: a body with "inputs" is LightLLM's, one with
// "prompt" or "prompt_batch" is RTP-LLM's (RTP-LLM has no /inference route).
//
// Request (RTP-LLM's RequestExtractor): GenerateConfig fields come in "generate_config" (alias
// "generation_config") and may also be given at the top level, where they win. Aliases as
// RTP-LLM: gen_length = max_new_tokens, output_input_ids = return_input_ids, output_logits =
// return_logits, output_hidden_states = return_hidden_states. "yield_generator" (top level or in
// generate_config) or top-level "stream": true streams. "prompt" as a list of several strings is
// refused (RTP-LLM runs them all but answers only the first); use "prompt_batch".
//
// GenerateConfig fields with an effect: max_new_tokens (32000, capped to what fits the context as
// RTP-LLM stops at max_seq_len), top_k (0: off), top_p, temperature (0: greedy), do_sample
// (false: greedy), repetition/presence/frequency_penalty, min_new_tokens, random_seed,
// stop_words_str, stop_words_list (one id per list), print_stop_words (keep the stop text),
// ignore_eos, skip_special_tokens (false, RTP-LLM's default), json_schema / regex / ebnf /
// structural_tag, num_return_sequences (0: one PipelineResponse; N > 0: N samples in a
// MultiSequencesPipelineResponse), return_output_ids / return_input_ids (nested [[...]]),
// aux_info (true), return_incremental (streams send deltas; refused without streaming, as
// RTP-LLM), return_cum_log_probs, return_logits (logits_index), return_hidden_states
// (hidden_states_cut_dim, normalized_hidden_states; both refused with num_return_sequences, whose
// response has no field for them), adapter_name. Every other GenerateConfig field is accepted at
// RTP-LLM's default and refused with a 400 naming it otherwise; fields RTP-LLM does not know are
// refused too (RTP-LLM drops them).
//
// Responses: PipelineResponse {"response", "finished", "aux_info", "hidden_states"?, "logits"?,
// "output_ids"?, "input_ids"?}: hidden_states [[the final hidden state the latest token was drawn
// from]], logits [[the raw logits row it was drawn from]] (the N-th token's with logits_index N,
// in the final answer), as RTP-LLM reports the last step of each engine event;
// MultiSequencesPipelineResponse {"response": [...], "finished", "aux_info": [...]}, and for
// prompt_batch {"response_batch": [...]}. Streams send one of these per engine event as an SSE
// event and end with "data:[done]" (none when the request said "stream": true), as RTP-LLM.
//
// Errors: RTP-LLM's format_exception body {"error_code", "error_code_str", "message"}
// (ErrorStyle::kRtpLlm). RTP-LLM answers every error with HTTP 500; radixserve keeps the status
// of the failure (400 for a refused request) so clients can tell a bad request from a fault.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/response_writer.h"
#include "api/server_context.h"
#include "api/serving.h"

namespace radixserve::api {

// Whether a POST / body is RTP-LLM's: it has "prompt" or "prompt_batch" and no "inputs".
bool IsRtpLlmBody(const nlohmann::json& body);

// The parse step of RTP-LLM's POST /.
ApiExpected<ServingPlan> ParseRtpLlm(ServerContext& ctx, const nlohmann::json& body);

// POST / with an RTP-LLM body (already parsed).
void ServeRtpLlm(ServerContext& ctx, const nlohmann::json& body, ResponseWriterPtr writer);

}  // namespace radixserve::api

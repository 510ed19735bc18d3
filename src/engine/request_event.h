// RequestEvent: what the engine reports to one request's consumer. A request receives zero or
// more progress events and exactly one final event (finished == true), after which it receives
// nothing more. Events are cumulative-free: each carries only what is new since the previous
// event (the API layer accumulates for the native API's cumulative text).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kv/kv_rows.h"
#include "sampling/finish_reason.h"

namespace radixserve::engine {

// SGLang's finish reasons (sampling/finish_reason.h), under the engine's names.
using sampling::AbortFinish;
using sampling::FinishKind;
using sampling::FinishReason;
using sampling::LengthFinish;
using sampling::StopTextFinish;
using sampling::StopTokenFinish;

struct TokenLogprobInfo {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // top_logprobs_num alternatives, best first
  std::vector<float> token_ids_logprobs;       // aligned with GenerateRequest::token_ids_logprob
};

struct RequestEvent {
  // Output tokens generated since the previous event, and the text they completed. The text is
  // only ever appended to (never retracted); a stop string and anything after it never appear.
  std::vector<int32_t> new_token_ids;
  std::string text_delta;
  std::vector<TokenLogprobInfo> output_logprobs;  // aligned with new_token_ids (if requested)
  // return_entropy: aligned with new_token_ids, the entropy (nats) of the distribution each token
  // was drawn from: softmax(processed logits / temperature), before top-k/top-p/min-p.
  std::vector<float> output_entropy;
  // return_logits: the raw logits row of the event's last output token (see GenerateRequest);
  // empty when the event has no new token.
  std::vector<float> logits;
  // Prompt logprobs, in the first event only: one entry per prompt position from
  // logprob_start_len to the end, entry i holding log P(token_i | tokens before i). Like SGLang,
  // the first entry has no computed value: its logprob is NaN (reported as null).
  std::vector<TokenLogprobInfo> input_logprobs;

  // return_hidden_states: the hidden states of the positions since the previous event, in
  // position order, starting at position hidden_states_from (0 in the first event: the prompt's
  // rows come first). Position p's row is the hidden state after feeding fill token p; the last
  // output token is never fed, so a finished request has prompt + completion - 1 rows (the whole
  // prompt when nothing was generated).
  std::vector<std::vector<float>> hidden_states;
  int64_t hidden_states_from = 0;

  bool finished = false;
  std::optional<FinishReason> finish_reason;  // set when finished

  // Running totals at the time of the event.
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache
  // Of those, the ones the hierarchical cache loaded from storage; -1 without a storage tier.
  int64_t storage_cached_tokens = -1;
  // Speculative decoding (nullopt when the server runs none): decode steps that verified drafts
  // for this request (every decode step of a speculative request, with or without a draft).
  std::optional<int64_t> spec_verify_ct;
  double e2e_latency_s = 0.0;  // since GenerateRequest::arrival
  // GenerateRequest::export_kv, final event only: the prompt's K/V rows (null when the prompt's
  // K/V was never complete, e.g. an abort before its prefill ended).
  std::shared_ptr<const kv::KvRows> kv_rows;
};

}  // namespace radixserve::engine

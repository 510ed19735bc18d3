// GenerateRequest: what a client asked for, fixed once the API layer has parsed and tokenized it
// (MLC-LLM's Request vs RequestState split: the engine's mutable per-sequence state lives in the
// engine, never here). Built on an HTTP thread, moved into Engine::Submit, read by the engine
// thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/lora_registry.h"
#include "kv/kv_rows.h"
#include "sampling/compiled_grammar.h"
#include "sampling/sampling_params.h"
#include "tokenizer/stop_regex_matcher.h"

namespace radixserve::engine {

// SGLang's bootstrap fields of a disaggregated request (the router sets them): where the prefill
// server's bootstrap service listens and the room naming this request's transfer there. The API
// layer acts on them; the engine does not read them.
struct Bootstrap {
  std::string host;
  int32_t port = 0;
  uint64_t room = 0;
};

struct GenerateRequest {
  std::string rid;                    // unique id; /abort_request matches it by prefix
  std::vector<int32_t> input_ids;     // the prompt, already tokenized (chat template applied)
  sampling::SamplingParams sampling;  // verified against the vocabulary; n == 1 (the API layer
                                      // submits n requests for n > 1)
  bool stream = false;
  // The sampling params' json_schema / regex / ebnf / structural_tag constraint, compiled by the
  // API layer (off the engine thread); null for an unconstrained request. Shared, immutable.
  std::shared_ptr<const sampling::CompiledGrammar> grammar;
  // When set, the grammar constrains only the output after the first occurrence of this token
  // (a reasoning model's end-of-thinking token: SGLang's reasoner grammar, so that the thinking
  // is free and the answer constrained). Until then every token is allowed.
  std::optional<int32_t> grammar_start_token;
  // sampling.stop_regex, compiled by the API layer (same order).
  std::vector<tokenizer::StopRegex> stop_regex;
  // The data-parallel replica a router chose (SGLang's routed_dp_rank); the API checks it is in
  // [0, --dp-size). nullopt: --load-balance-method decides.
  std::optional<int32_t> routed_dp_rank;
  // Priority for --enable-priority-scheduling (nullopt: the default priority).
  std::optional<int64_t> priority;
  // Prefix-cache namespace (SGLang: cache_salt + extra_key): requests with different keys never
  // share cached prefixes. Empty: the shared namespace.
  std::string extra_key;
  // The LoRA adapter this request runs with (resolved by the API layer); nullopt: the base model.
  // The engine keeps its prefixes apart from every other adapter's (and the base model's).
  std::optional<LoraRef> lora;

  // Logprobs (native API names; OpenAI's are mapped onto these).
  bool return_logprob = false;
  int64_t logprob_start_len = -1;  // -1: no prompt logprobs; else from this prompt position
  int32_t top_logprobs_num = 0;
  std::vector<int32_t> token_ids_logprob;
  bool return_text_in_logprobs = false;
  // SGLang's return_hidden_states: the final hidden state (after the last norm) of every prompt
  // position and of every output token fed back (RequestEvent::hidden_states). Such a request
  // computes its whole prompt (no prefix-cache match) and does not speculate.
  bool return_hidden_states = false;
  // SGLang's return_entropy: the entropy of each output token's sampling distribution
  // (RequestEvent::output_entropy). Such a request samples every token (no jump-forward).
  bool return_entropy = false;
  // RTP-LLM's return_logits: the raw logits row (the model's output, before penalties, grammar
  // masks and temperature) each output token was drawn from; an event carries the row of its last
  // token (RequestEvent::logits). With logits_index N > 0 the final event carries the row of the
  // N-th output token instead, once the request got that far. Such a request samples every token
  // (no jump-forward).
  bool return_logits = false;
  int64_t logits_index = 0;

  // Prefill/decode disaggregation (docs/disaggregation.md).
  // Decode side: the K/V rows of the prompt that the prefill server computed. The engine puts
  // them into the prefix cache when the request arrives (and holds them until it is admitted),
  // so admission matches them and computes only the prompt's last token, whose logits give the
  // first output token. Rows of other tokens than the prompt's simply do not match.
  std::shared_ptr<const kv::KvRows> prefilled_kv;
  std::optional<Bootstrap> bootstrap;
  // Prefill side: the final event carries the prompt's K/V rows (RequestEvent::kv_rows).
  bool export_kv = false;

  // Text generation: detokenize incrementally and match stop strings (false: token ids only,
  // e.g. --skip-tokenizer-init).
  bool detokenize = true;

  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
};

}  // namespace radixserve::engine

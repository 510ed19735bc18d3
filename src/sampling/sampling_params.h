// SamplingParams: what a request asked for, as SGLang 0.5.x's `SamplingParams` defines it (fields,
// defaults, constructor normalization, verify() messages). Immutable after parsing; built on an
// HTTP thread, read by the engine thread.
//
// Flow:  JSON object --FromJson--> SamplingParams (constructor semantics) --Verify(vocab)--> ok
//   * FromJson mirrors SGLang's constructor: defaults; `null` means the default, except for
//     max_new_tokens (null: no limit but the context) and sampling_seed (null: SGLang's error);
//     `0 <= temperature < 1e-6` becomes greedy (temperature 1.0, top_k 1); top_k -1 becomes
//     kTopKAll. Unknown keys fail with Python's TypeError text (SGLang answers those with a 500;
//     we return InvalidArgument so the API layer can answer 400 — a deliberate fix). Wrong JSON
//     types fail with our own InvalidArgument text. OpenAI's `seed` is the API layer's to map
//     onto sampling_seed (here it is an unknown key, as in SGLang's native API).
//   * Verify returns InvalidArgument with SGLang's exact ValueError messages, in SGLang's order,
//     then our own "n must be at least 1" check (SGLang has none).
// Defaults from generation_config.json and --preferred-sampling-params are merged into the JSON
// object *before* FromJson (see sampling_defaults.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace radixserve::sampling {

// top_k meaning "whole vocabulary" (SGLang's TOP_K_ALL).
inline constexpr int64_t kTopKAll = int64_t{1} << 30;
// temperature below this (and >= 0) means greedy decoding.
inline constexpr double kSamplingEps = 1e-6;

// One logit_bias entry. `key` is the JSON key as sent (messages quote it verbatim). `token_id` is
// Python's int(key); nullopt when int() would fail (Verify reports it).
struct LogitBiasEntry {
  std::string key;
  std::optional<int64_t> token_id;
  double bias = 0.0;
};

struct SamplingJsonOptions {
  // OpenAI routes go through pydantic, which turns every float-typed field into a float
  // (temperature 0 -> 0.0); the native /generate keeps JSON ints as ints. Only affects how
  // numbers print in error messages.
  bool float_fields_are_floats = false;
};

struct SamplingParams {
  std::optional<int64_t> max_new_tokens = 128;  // nullopt: limited by the context length only
  std::vector<std::string> stop;                // `stop` (str or list of str), as a list
  std::vector<int32_t> stop_token_ids;          // sorted, unique
  std::vector<std::string> stop_regex;          // `stop_regex` (str or list), as a list
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = kTopKAll;
  double min_p = 0.0;
  double frequency_penalty = 0.0;
  double presence_penalty = 0.0;
  double repetition_penalty = 1.0;
  int64_t min_new_tokens = 0;
  int64_t n = 1;
  std::optional<std::string> json_schema;
  std::optional<std::string> regex;
  std::optional<std::string> ebnf;
  std::optional<std::string> structural_tag;
  bool ignore_eos = false;  // also disables stop_token_ids (SGLang)
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;
  bool no_stop_trim = false;
  nlohmann::json custom_params;            // null when absent
  std::optional<int64_t> stream_interval;  // per-request --stream-interval override
  std::vector<LogitBiasEntry> logit_bias;  // in the parsed object's key order (nlohmann: sorted)
  // Per-request seed (`sampling_seed`, OpenAI `seed`). nullopt: the engine draws one from the
  // server SeedSource (--random-seed). An explicit JSON null is SGLang's "should not be None".
  std::optional<uint64_t> sampling_seed;
  bool sampling_seed_is_null = false;

  // Whether each float field was written as a JSON integer (for Python-exact messages).
  struct IntegerLiterals {
    bool temperature = false, top_p = false, min_p = false, frequency_penalty = false,
         presence_penalty = false, repetition_penalty = false;
  } integer_literals;

  // top_k == 1 (temperature < 1e-6 normalizes to this): argmax, ties to the lowest token id.
  bool IsGreedy() const { return top_k <= 1; }
  bool HasGrammar() const { return json_schema || regex || ebnf || structural_tag; }

  // Builds params from a `sampling_params` JSON object (native API field names). Errors are
  // InvalidArgument: unknown key, wrong JSON type.
  static Expected<SamplingParams> FromJson(const nlohmann::json& object,
                                           const SamplingJsonOptions& options = {});

  // SGLang's verify(vocab_size): the first violated rule, as InvalidArgument with its message.
  Status Verify(int64_t vocab_size) const;
};

}  // namespace radixserve::sampling

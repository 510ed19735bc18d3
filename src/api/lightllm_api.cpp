#include "api/lightllm_api.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "api/json_body.h"
#include "api/json_fields.h"
#include "api/openai_common.h"
#include "api/request_builder.h"

namespace radixserve::api {
namespace {

using nlohmann::json;

// LightLLM's MAX_BEST_OF.
constexpr int64_t kMaxBestOf = 8;

// The parameters radixserve gives their LightLLM meaning.
const std::set<std::string, std::less<>>& UsedParameters() {
  static const std::set<std::string, std::less<>> used = {"do_sample",
                                                          "temperature",
                                                          "top_p",
                                                          "top_k",
                                                          "presence_penalty",
                                                          "frequency_penalty",
                                                          "repetition_penalty",
                                                          "max_new_tokens",
                                                          "min_new_tokens",
                                                          "stop_sequences",
                                                          "ignore_eos",
                                                          "skip_special_tokens",
                                                          "add_special_tokens",
                                                          "add_spaces_between_special_tokens",
                                                          "regular_constraint",
                                                          "guided_grammar",
                                                          "guided_json",
                                                          "n",
                                                          "best_of",
                                                          "return_details"};
  return used;
}

// LightLLM features radixserve does not have, with the value that means "off".
const std::map<std::string, json, std::less<>>& DefaultOnlyParameters() {
  static const std::map<std::string, json, std::less<>> fields = {
      {"allowed_token_ids", json::array()},
      {"input_penalty", false},
      {"exponential_decay_length_penalty", json::array({1, 1.0})},
      {"print_eos_token", false},
      {"image_max_patch_num", -1},
      {"group_request_id", -1},
      {"suggested_dp_index", -1},
      {"move_kv_to_decode_node", nullptr},
  };
  return fields;
}

bool IsOff(const json& value, const json& off) {
  return value.is_null() || value == off || (value.is_array() && value.empty()) ||
         (value.is_object() && value.empty());
}

ApiError Invalid(const Status& status) { return InvalidRequest(status.message()); }

// stop_sequences: a string, a list of strings, or a list of token-id lists (one id each here).
std::optional<ApiError> ReadStops(const json& value, const ServerContext& ctx, json& sampling) {
  if (value.is_null()) return std::nullopt;
  if (value.is_string()) {
    sampling["stop"] = json::array({value});
    return std::nullopt;
  }
  const char* shape = "stop_sequences only support str, list[str], list[list[int]] type";
  if (!value.is_array()) return InvalidRequest(shape);
  json strings = json::array(), ids = json::array();
  for (const json& item : value) {
    if (item.is_string()) {
      strings.push_back(item);
    } else if (item.is_array()) {
      auto read = ReadTokenIds(item, "stop_sequences", ctx.model.vocab_size);
      if (!read.ok()) return Invalid(read.status());
      if (read->size() > 1) {
        return BadRequest(
            "stop_sequences of several token ids are not supported by radixserve: give the stop "
            "as a string, or one token id per list.");
      }
      if (!read->empty()) ids.push_back((*read)[0]);
    } else {
      return InvalidRequest(shape);
    }
  }
  if (!strings.empty() && !ids.empty()) return InvalidRequest(shape);
  if (!strings.empty()) sampling["stop"] = std::move(strings);
  if (!ids.empty()) sampling["stop_token_ids"] = std::move(ids);
  return std::nullopt;
}

// LightLLM's SamplingParams (verify() included) as SGLang's sampling-params dict, and the options
// that are not sampling parameters.
struct LightLlmParams {
  json sampling = json::object();
  int64_t n = 1;
  bool details = false;
  bool add_special_tokens = true;
};

ApiExpected<LightLlmParams> ReadParameters(const ServerContext& ctx, const json& params) {
  LightLlmParams out;
  for (const auto& [key, value] : params.items()) {
    if (UsedParameters().contains(key)) continue;
    auto off = DefaultOnlyParameters().find(key);
    const std::string shown = key.size() > 64 ? key.substr(0, 64) + "..." : key;
    if (off == DefaultOnlyParameters().end()) {
      return InvalidRequest(fmt::format("parameters got an unexpected field '{}'", shown));
    }
    if (!IsOff(value, off->second)) {
      return BadRequest(fmt::format(
          "parameters.{} is not supported by radixserve: leave it out or at its default.", shown));
    }
  }
  auto number = [&](const char* key) -> ApiExpected<std::optional<double>> {
    auto it = params.find(key);
    if (it == params.end() || it->is_null()) return std::optional<double>();
    if (!it->is_number() || it->is_boolean()) {
      return InvalidRequest(fmt::format("parameters.{} must be a number.", key));
    }
    return std::optional<double>(it->get<double>());
  };
  auto flag = [&](const char* key, bool fallback) -> Expected<bool> {
    RADIX_ASSIGN_OR_RETURN(auto read, ReadOptionalBool(params, key));
    return read.value_or(fallback);
  };
  std::optional<double> temperature, top_p, presence, frequency, repetition;
  RADIX_ASSIGN_OR_RETURN(temperature, number("temperature"));
  RADIX_ASSIGN_OR_RETURN(top_p, number("top_p"));
  RADIX_ASSIGN_OR_RETURN(presence, number("presence_penalty"));
  RADIX_ASSIGN_OR_RETURN(frequency, number("frequency_penalty"));
  RADIX_ASSIGN_OR_RETURN(repetition, number("repetition_penalty"));
  auto top_k = ReadOptionalInt(params, "top_k");
  auto max_new = ReadOptionalInt(params, "max_new_tokens");
  auto min_new = ReadOptionalInt(params, "min_new_tokens");
  auto best_of = ReadOptionalInt(params, "best_of");
  auto n = ReadOptionalInt(params, "n");
  for (const auto* read : {&top_k, &max_new, &min_new, &best_of, &n}) {
    if (!read->ok()) return Invalid(read->status());
  }
  bool do_sample = false, ignore_eos = false, skip_special = true, spaces = true;
  for (auto [key, target, fallback] :
       {std::tuple{"do_sample", &do_sample, false}, std::tuple{"ignore_eos", &ignore_eos, false},
        std::tuple{"skip_special_tokens", &skip_special, true},
        std::tuple{"add_spaces_between_special_tokens", &spaces, true},
        std::tuple{"add_special_tokens", &out.add_special_tokens, true},
        std::tuple{"return_details", &out.details, false}}) {
    auto read = flag(key, fallback);
    if (!read.ok()) return Invalid(read.status());
    *target = *read;
  }

  // LightLLM: do_sample false, or a temperature below 1e-5, is greedy search.
  double temp = temperature.value_or(1.0);
  double p = top_p.value_or(1.0);
  int64_t k = top_k->value_or(-1);
  if (!do_sample || (temp >= 0.0 && temp < 1e-5)) {
    temp = 1.0;
    p = 1.0;
    k = 1;
  }
  out.n = n->value_or(best_of->value_or(1));
  const int64_t best = best_of->value_or(1);
  const int64_t max_new_tokens = max_new->value_or(16);
  const int64_t min_new_tokens = min_new->value_or(1);
  // LightLLM's verify(), with its messages.
  if (best <= 0 || best > kMaxBestOf) {
    return BadRequest(fmt::format("need 0 < best_of <= {}, but got {}", kMaxBestOf, best));
  }
  if (out.n != best) return BadRequest("current only supported n == best_of");
  if (out.n > ctx.limits.max_n) {
    return BadRequest(
        fmt::format("n must be at most {} (the server's --max-n).", ctx.limits.max_n));
  }
  if (presence.value_or(0.0) < 0.0) {
    return BadRequest(fmt::format("presence_penalty must >= 0.0, got {}", *presence));
  }
  if (frequency.value_or(0.0) < 0.0) {
    return BadRequest(fmt::format("frequency_penalty must >= 0.0, got {}", *frequency));
  }
  if (repetition.value_or(1.0) < 1.0) {
    return BadRequest(fmt::format("repetition_penalty must >= 1.0, got {}", *repetition));
  }
  if (temp <= 0.0) return BadRequest(fmt::format("temperature must > 0.0, got {}", temp));
  if (p <= 0.0 || p > 1.0) return BadRequest(fmt::format("top_p must be in (0.0, 1.0], got {}", p));
  if (k < -1 || k == 0) {
    return BadRequest(fmt::format("top_k must be -1 (disable), or at least 1, got {}.", k));
  }
  if (max_new_tokens < 1) {
    return BadRequest(fmt::format("max_new_tokens must be at least 1, got {}.", max_new_tokens));
  }
  if (min_new_tokens < 1) {
    return BadRequest(fmt::format("min_new_tokens must be at least 1, got {}.", min_new_tokens));
  }
  if (min_new_tokens > max_new_tokens) {
    return BadRequest(fmt::format("min_new_tokens must <= max_new_tokens, but got min {}, max {}.",
                                  min_new_tokens, max_new_tokens));
  }

  json& s = out.sampling;
  s["temperature"] = temp;
  s["top_p"] = p;
  s["top_k"] = k;
  if (presence) s["presence_penalty"] = *presence;
  if (frequency) s["frequency_penalty"] = *frequency;
  if (repetition) s["repetition_penalty"] = *repetition;
  s["max_new_tokens"] = max_new_tokens;
  // LightLLM's min_new_tokens counts the first token, which is always generated.
  if (min_new_tokens > 1) s["min_new_tokens"] = min_new_tokens;
  s["ignore_eos"] = ignore_eos;
  s["no_stop_trim"] = true;  // LightLLM's output keeps the stop sequence
  s["skip_special_tokens"] = skip_special;
  s["spaces_between_special_tokens"] = spaces;
  if (auto it = params.find("stop_sequences"); it != params.end()) {
    if (auto error = ReadStops(*it, ctx, s)) return *error;
  }
  int constraints = 0;
  for (auto [from, to] :
       {std::pair{"regular_constraint", "regex"}, std::pair{"guided_grammar", "ebnf"}}) {
    auto it = params.find(from);
    if (it == params.end() || it->is_null() || (it->is_string() && it->empty())) continue;
    if (!it->is_string()) return InvalidRequest(fmt::format("{} must be a string.", from));
    s[to] = *it;
    ++constraints;
  }
  if (auto it = params.find("guided_json");
      it != params.end() && !it->is_null() && !(it->is_string() && it->empty())) {
    if (!it->is_string() && !it->is_object()) {
      return InvalidRequest("guided_json must be a JSON schema (object) or its text.");
    }
    s["json_schema"] = it->is_string() ? it->get<std::string>() : it->dump();
    ++constraints;
  }
  if (constraints > 1) {
    return BadRequest(
        "regular_constraint, guided_grammar and guided_json can not be used in same time");
  }
  return out;
}

// TGI's GenerateParameters as SGLang's sampling-params dict. Sampling is on when do_sample is true
// or a warper (temperature != 1, top_k, top_p < 1) is set, as in TGI; greedy otherwise.
struct TgiParams {
  json sampling = json::object();
  int64_t best_of = 1;
  bool details = false;
  bool decoder_input_details = false;
  bool full_text = false;
  std::optional<int64_t> seed;
};

ApiExpected<TgiParams> ReadTgiParameters(const ServerContext& ctx, const json& params) {
  static const std::set<std::string, std::less<>> kKnown = {"best_of",
                                                            "details",
                                                            "do_sample",
                                                            "max_new_tokens",
                                                            "repetition_penalty",
                                                            "frequency_penalty",
                                                            "return_full_text",
                                                            "stop",
                                                            "seed",
                                                            "temperature",
                                                            "top_k",
                                                            "top_p",
                                                            "truncate",
                                                            "typical_p",
                                                            "watermark",
                                                            "decoder_input_details",
                                                            "top_n_tokens",
                                                            "grammar",
                                                            "adapter_id"};
  for (const auto& [key, value] : params.items()) {
    if (!kKnown.contains(key)) {
      return InvalidRequest(fmt::format("parameters got an unexpected field '{}'",
                                        key.size() > 64 ? key.substr(0, 64) + "..." : key));
    }
  }
  for (auto [key, off] :
       {std::pair{"truncate", json(nullptr)}, std::pair{"typical_p", json(1.0)},
        std::pair{"watermark", json(false)}, std::pair{"top_n_tokens", json(nullptr)},
        std::pair{"adapter_id", json(nullptr)}}) {
    auto it = params.find(key);
    if (it != params.end() && !IsOff(*it, off)) {
      return BadRequest(
          fmt::format("parameters.{} is not supported by radixserve: leave it out or null.", key));
    }
  }
  TgiParams out;
  auto flag = [&](const char* key, bool& target) -> std::optional<ApiError> {
    auto read = ReadOptionalBool(params, key);
    if (!read.ok()) return Invalid(read.status());
    target = read->value_or(false);
    return std::nullopt;
  };
  bool do_sample = false;
  for (auto [key, target] : {std::pair{"do_sample", &do_sample}, std::pair{"details", &out.details},
                             std::pair{"decoder_input_details", &out.decoder_input_details},
                             std::pair{"return_full_text", &out.full_text}}) {
    if (auto error = flag(key, *target)) return *error;
  }
  json& s = out.sampling;
  bool warped = false;
  for (const char* key : {"temperature", "top_p", "repetition_penalty", "frequency_penalty"}) {
    auto it = params.find(key);
    if (it == params.end() || it->is_null()) continue;
    if (!it->is_number() || it->is_boolean() || it->get<double>() <= 0.0) {
      return InvalidRequest(fmt::format("`{}` must be strictly positive", key));
    }
    s[key] = *it;
  }
  if (s.contains("top_p") && s["top_p"].get<double>() >= 1.0) {
    return InvalidRequest("`top_p` must be > 0.0 and < 1.0");
  }
  warped =
      (s.contains("temperature") && s["temperature"].get<double>() != 1.0) || s.contains("top_p");
  auto top_k = ReadOptionalInt(params, "top_k", 1);
  auto max_new = ReadOptionalInt(params, "max_new_tokens", 1);
  auto best_of = ReadOptionalInt(params, "best_of", 1, kMaxBestOf);
  auto seed = ReadOptionalInt(params, "seed", 0);
  for (const auto* read : {&top_k, &max_new, &best_of, &seed}) {
    if (!read->ok()) return Invalid(read->status());
  }
  if (*top_k) {
    s["top_k"] = **top_k;
    warped = true;
  }
  if (!do_sample && !warped) {
    s.erase("temperature");
    s.erase("top_p");
    s["top_k"] = 1;  // greedy
  }
  s["max_new_tokens"] = max_new->value_or(20);
  s["no_stop_trim"] = true;  // TGI's generated_text keeps the stop sequence
  out.best_of = best_of->value_or(1);
  if (out.best_of > 1 && !do_sample && !warped) {
    return InvalidRequest("you must use sampling when `best_of` is > 1");
  }
  if (out.best_of > 1 && *seed)
    return InvalidRequest("`seed` must not be set when `best_of` is > 1");
  out.seed = *seed;
  if (out.seed) s["sampling_seed"] = *out.seed;
  if (auto it = params.find("stop"); it != params.end() && !it->is_null()) {
    if (!it->is_array() ||
        !std::all_of(it->begin(), it->end(), [](const json& stop) { return stop.is_string(); })) {
      return InvalidRequest("stop must be a list of strings.");
    }
    if (!it->empty()) s["stop"] = *it;
  }
  if (auto it = params.find("grammar"); it != params.end() && !it->is_null()) {
    const json* type = it->is_object() && it->contains("type") ? &(*it)["type"] : nullptr;
    const json* value = it->is_object() && it->contains("value") ? &(*it)["value"] : nullptr;
    if (type != nullptr && *type == "json" && value != nullptr &&
        (value->is_object() || value->is_string())) {
      s["json_schema"] = value->is_string() ? value->get<std::string>() : value->dump();
    } else if (type != nullptr && *type == "regex" && value != nullptr && value->is_string() &&
               !value->get_ref<const std::string&>().empty()) {
      s["regex"] = *value;
    } else {
      return InvalidRequest(
          "grammar must be {\"type\": \"json\", \"value\": schema} or {\"type\": \"regex\", "
          "\"value\": pattern}.");
    }
  }
  (void)ctx;
  return out;
}

// LightLLM reports no reason for an aborted request.
json LightLlmFinish(const ChoiceState& choice) {
  if (!choice.finish || choice.finish->kind == engine::FinishKind::kAbort) return nullptr;
  return openai::FinishReasonName(choice);
}

// TGI's FinishReason: length, eos_token (EOS or a stop token id), stop_sequence.
json TgiFinish(const ChoiceState& choice) {
  if (!choice.finish) return nullptr;
  switch (choice.finish->kind) {
    case engine::FinishKind::kStop:
      return choice.finish->matched_str ? "stop_sequence" : "eos_token";
    case engine::FinishKind::kLength:
      return "length";
    case engine::FinishKind::kAbort:
      break;
  }
  return nullptr;
}

bool Failed(const ChoiceState& choice) {
  return choice.finish && choice.finish->kind == engine::FinishKind::kAbort &&
         choice.finish->status_code >= 400;
}

bool IsSpecial(const ServerContext& ctx, int32_t id) {
  return ctx.tokenizer != nullptr && ctx.tokenizer->IsSpecial(id);
}

// Both dialects stream one event per generated token, as LightLLM and TGI do. An engine event
// may carry several tokens (its text released together, e.g. after a held-back stop-string
// prefix): the text goes with the last of them, so that concatenating token texts gives the
// output.
template <typename TokenEvent>
void PerToken(const engine::RequestEvent& event, TokenEvent&& token_event) {
  const size_t count = event.new_token_ids.size();
  for (size_t i = 0; i < count; ++i) {
    const bool last = i + 1 == count;
    json logprob =
        i < event.output_logprobs.size() ? json(event.output_logprobs[i].logprob) : json(nullptr);
    token_event(event.new_token_ids[i], last ? event.text_delta : std::string(), std::move(logprob),
                i, last);
  }
}

// LightLLM's answers (api_lightllm.py).
class LightLlmFormatter final : public ResponseFormatter {
 public:
  // `prompt_logprobs`: --return_all_prompt_logprobs (the requests computed their input logprobs
  // from the prompt's first token).
  LightLlmFormatter(bool details, bool prompt_logprobs)
      : details_(details), prompt_logprobs_(prompt_logprobs) {}

  void StreamEvent(const ServerContext& ctx, const std::vector<ChoiceState>& choices, size_t index,
                   const engine::RequestEvent& event, const Emit& emit) override {
    const ChoiceState& choice = choices[index];
    if (Failed(choice)) {
      emit(json{{"message", choice.finish->message}});
      return;
    }
    const int64_t before =
        choice.completion_tokens - static_cast<int64_t>(event.new_token_ids.size());
    PerToken(event, [&](int32_t id, std::string text, json logprob, size_t i, bool last) {
      const bool finished = last && event.finished;
      emit(json{{"token",
                 {{"id", id},
                  {"text", std::move(text)},
                  {"logprob", std::move(logprob)},
                  {"special", IsSpecial(ctx, id)},
                  {"count_output_tokens", before + static_cast<int64_t>(i) + 1},
                  {"prompt_tokens", choice.prompt_tokens}}},
                {"generated_text", nullptr},
                {"finished", finished},
                {"finish_reason", finished ? LightLlmFinish(choice) : json(nullptr)},
                {"details", nullptr}});
    });
    if (event.finished && event.new_token_ids.empty()) {
      emit(json{{"token",
                 {{"id", nullptr},
                  {"text", event.text_delta},
                  {"logprob", nullptr},
                  {"special", false},
                  {"count_output_tokens", choice.completion_tokens},
                  {"prompt_tokens", choice.prompt_tokens}}},
                {"generated_text", nullptr},
                {"finished", true},
                {"finish_reason", LightLlmFinish(choice)},
                {"details", nullptr}});
    }
  }

  void StreamEnd(const ServerContext&, const std::vector<ChoiceState>&, const Emit&) override {}

  FormattedResponse Complete(const ServerContext& ctx,
                             const std::vector<ChoiceState>& choices) override {
    for (const ChoiceState& choice : choices) {
      if (Failed(choice)) {
        return {choice.finish->status_code, json{{"message", choice.finish->message}}};
      }
    }
    json texts = json::array(), counts = json::array(), reasons = json::array(),
         tokens = json::array();
    for (const ChoiceState& choice : choices) {
      texts.push_back(choice.text);
      counts.push_back(choice.completion_tokens);
      reasons.push_back(LightLlmFinish(choice));
      if (details_) tokens.push_back(Tokens(ctx, choice));
    }
    const bool one = choices.size() == 1;
    json out = {{"generated_text", std::move(texts)},
                {"count_output_tokens", one ? counts[0] : counts},
                {"finish_reason", one ? reasons[0] : reasons},
                {"prompt_tokens", choices[0].prompt_tokens}};
    if (details_) out["tokens"] = one ? tokens[0] : tokens;
    if (prompt_logprobs_) AddPromptLogprobs(choices[0], out);
    return {200, std::move(out)};
  }

 private:
  // Per-token metadata as LightLLM's return_details lists it.
  static json Tokens(const ServerContext& ctx, const ChoiceState& choice) {
    json tokens = json::array();
    for (size_t i = 0; i < choice.output_ids.size(); ++i) {
      const int32_t id = choice.output_ids[i];
      tokens.push_back(
          {{"id", id},
           {"text", TokenText(ctx, id)},
           {"logprob", i < choice.output_logprobs.size() ? json(choice.output_logprobs[i].logprob)
                                                         : json(nullptr)},
           {"special", IsSpecial(ctx, id)},
           {"count_output_tokens", i + 1},
           {"prompt_tokens", choice.prompt_tokens}});
    }
    return tokens;
  }

  // LightLLM's --return_all_prompt_logprobs fields: prompt_token_ids, and for every prompt token
  // but the last [its id, {next id: the next token's log-probability}].
  static void AddPromptLogprobs(const ChoiceState& choice, json& out) {
    json ids = json::array(), pairs = json::array();
    const auto& infos = choice.input_logprobs;
    for (size_t i = 0; i < infos.size(); ++i) {
      ids.push_back(infos[i].token_id);
      if (i + 1 < infos.size()) {
        const float next = infos[i + 1].logprob;
        pairs.push_back(json::array({infos[i].token_id,
                                     {{std::to_string(infos[i + 1].token_id),
                                       std::isnan(next) ? json(nullptr) : json(next)}}}));
      }
    }
    out["prompt_token_ids"] = std::move(ids);
    out["prompt_logprobs"] = std::move(pairs);
  }

  bool details_;
  bool prompt_logprobs_;
};

// Text Generation Inference's answers (its OpenAPI schema: GenerateResponse, StreamResponse).
class TgiFormatter final : public ResponseFormatter {
 public:
  struct Options {
    bool details = false;
    bool prefill = false;      // decoder_input_details
    bool list_answer = false;  // POST / answers [GenerateResponse]
    std::string full_text;     // return_full_text: the prompt, prepended
    std::optional<int64_t> seed;
  };

  explicit TgiFormatter(Options options) : o_(std::move(options)) {}

  void StreamEvent(const ServerContext& ctx, const std::vector<ChoiceState>& choices, size_t index,
                   const engine::RequestEvent& event, const Emit& emit) override {
    const ChoiceState& choice = choices[index];
    if (Failed(choice)) {
      emit(json{{"error", choice.finish->message}, {"error_type", "generation"}});
      return;
    }
    auto send = [&](json token, bool finished) {
      json out = {{"index", 0},
                  {"token", std::move(token)},
                  {"top_tokens", nullptr},
                  {"generated_text", nullptr},
                  {"details", nullptr}};
      if (finished) {
        out["generated_text"] = o_.full_text + choice.text;
        out["details"] = {{"finish_reason", TgiFinish(choice)},
                          {"generated_tokens", choice.completion_tokens},
                          {"seed", Seed()}};
      }
      emit(out);
    };
    PerToken(event, [&](int32_t id, std::string text, json logprob, size_t, bool last) {
      send(Token(ctx, id, std::move(text), std::move(logprob)), last && event.finished);
    });
    if (event.finished && event.new_token_ids.empty()) {
      send(json{{"id", 0}, {"text", event.text_delta}, {"logprob", nullptr}, {"special", true}},
           true);
    }
  }

  void StreamEnd(const ServerContext&, const std::vector<ChoiceState>&, const Emit&) override {}

  FormattedResponse Complete(const ServerContext& ctx,
                             const std::vector<ChoiceState>& choices) override {
    for (const ChoiceState& choice : choices) {
      if (Failed(choice)) {
        return {choice.finish->status_code,
                json{{"error", choice.finish->message}, {"error_type", "generation"}}};
      }
    }
    // best_of: the choice with the highest cumulative logprob; the others are listed.
    size_t best = 0;
    double best_score = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < choices.size(); ++i) {
      double score = 0.0;
      for (const auto& info : choices[i].output_logprobs) score += info.logprob;
      if (score > best_score) {
        best_score = score;
        best = i;
      }
    }
    const ChoiceState& choice = choices[best];
    json out = {{"generated_text", o_.full_text + choice.text}};
    if (o_.details) {
      json others = nullptr;
      if (choices.size() > 1) {
        others = json::array();
        for (size_t i = 0; i < choices.size(); ++i) {
          if (i == best) continue;
          others.push_back({{"generated_text", o_.full_text + choices[i].text},
                            {"finish_reason", TgiFinish(choices[i])},
                            {"generated_tokens", choices[i].completion_tokens},
                            {"seed", nullptr},
                            {"prefill", Prefill(ctx, choices[i])},
                            {"tokens", Tokens(ctx, choices[i])}});
        }
      }
      out["details"] = {{"finish_reason", TgiFinish(choice)},
                        {"generated_tokens", choice.completion_tokens},
                        {"seed", Seed()},
                        {"prefill", Prefill(ctx, choice)},
                        {"tokens", Tokens(ctx, choice)},
                        {"top_tokens", nullptr},
                        {"best_of_sequences", std::move(others)}};
    }
    if (o_.list_answer) return {200, json::array({std::move(out)})};
    return {200, std::move(out)};
  }

 private:
  json Seed() const { return o_.seed ? json(*o_.seed) : json(nullptr); }

  static json Token(const ServerContext& ctx, int32_t id, std::string text, json logprob) {
    return {{"id", id},
            {"text", std::move(text)},
            {"logprob", std::move(logprob)},
            {"special", IsSpecial(ctx, id)}};
  }

  static json Tokens(const ServerContext& ctx, const ChoiceState& choice) {
    json tokens = json::array();
    for (size_t i = 0; i < choice.output_ids.size(); ++i) {
      tokens.push_back(Token(ctx, choice.output_ids[i], TokenText(ctx, choice.output_ids[i]),
                             i < choice.output_logprobs.size()
                                 ? json(choice.output_logprobs[i].logprob)
                                 : json(nullptr)));
    }
    return tokens;
  }

  // The prompt tokens with their logprobs (the first has none) when decoder_input_details.
  json Prefill(const ServerContext& ctx, const ChoiceState& choice) const {
    json prefill = json::array();
    if (!o_.prefill) return prefill;
    for (const auto& info : choice.input_logprobs) {
      prefill.push_back(
          {{"id", info.token_id},
           {"text", TokenText(ctx, info.token_id)},
           {"logprob", std::isnan(info.logprob) ? json(nullptr) : json(info.logprob)}});
    }
    return prefill;
  }

  Options o_;
};

}  // namespace

bool IsLightLlmBody(const json& body) {
  return body.contains("inputs") && !body.contains("text") && !body.contains("input_ids");
}

ApiExpected<ServingPlan> ParseLightLlm(ServerContext& ctx, const json& body, bool stream, bool tgi,
                                       bool list_answer) {
  for (const auto& [key, value] : body.items()) {
    static const std::set<std::string, std::less<>> kTopLevel = {"inputs", "parameters",
                                                                 "multimodal_params"};
    if (!kTopLevel.contains(key)) {
      return InvalidRequest(
          fmt::format("unexpected field '{}'", key.size() > 64 ? key.substr(0, 64) + "..." : key));
    }
  }
  auto inputs = body.find("inputs");
  if (inputs == body.end() || !inputs->is_string()) {
    return InvalidRequest("Field 'inputs' is required and must be a string.");
  }
  if (auto mm = body.find("multimodal_params"); mm != body.end() && !IsOff(*mm, json::object())) {
    return BadRequest(
        "multimodal_params is not supported by radixserve: this model takes text only.");
  }
  json params = json::object();
  if (auto it = body.find("parameters"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return InvalidRequest("parameters must be an object.");
    params = *it;
  }
  const std::string prompt = inputs->get<std::string>();
  json sampling;
  int64_t n = 1;
  bool add_special_tokens = true, logprobs = true, prompt_logprobs = false;
  std::shared_ptr<ResponseFormatter> formatter;
  if (tgi) {
    TgiParams read;
    RADIX_ASSIGN_OR_RETURN(read, ReadTgiParameters(ctx, params));
    if (stream && read.best_of != 1)
      return InvalidRequest("`best_of` != 1 is not allowed for streaming");
    sampling = std::move(read.sampling);
    n = read.best_of;
    prompt_logprobs = read.decoder_input_details;
    formatter = std::make_shared<TgiFormatter>(
        TgiFormatter::Options{.details = read.details,
                              .prefill = read.decoder_input_details,
                              .list_answer = list_answer,
                              .full_text = read.full_text ? prompt : std::string(),
                              .seed = read.seed});
  } else {
    LightLlmParams read;
    RADIX_ASSIGN_OR_RETURN(read, ReadParameters(ctx, params));
    if (stream && read.n != 1) return BadRequest("stream api only support best_of == 1");
    sampling = std::move(read.sampling);
    n = read.n;
    add_special_tokens = read.add_special_tokens;
    // Streamed tokens and return_details carry logprobs; --return_all_prompt_logprobs adds the
    // prompt's (answered without streaming, as LightLLM does).
    const bool all_prompt = !ctx.args->IsNull(args::key::kReturnAllPromptLogprobs) &&
                            ctx.args->GetBool(args::key::kReturnAllPromptLogprobs);
    logprobs = stream || read.details || all_prompt;
    prompt_logprobs = all_prompt;
    formatter = std::make_shared<LightLlmFormatter>(read.details, all_prompt);
  }
  sampling["n"] = n;

  ServingPlan plan;
  plan.stream = stream;
  plan.group = static_cast<size_t>(n);
  plan.formatter = std::move(formatter);
  const std::string base_rid = NewRid(ctx);
  for (size_t i = 0; i < plan.group; ++i) {
    BuildOptions options{.rid = plan.group > 1 ? fmt::format("{}_{}", base_rid, i) : base_rid,
                         .stream = stream,
                         .priority = std::nullopt,
                         .extra_key = {},
                         .lora = std::nullopt,
                         .return_logprob = logprobs,
                         .logprob_start_len = prompt_logprobs ? 0 : -1,
                         .top_logprobs_num = 0,
                         .token_ids_logprob = {},
                         .return_text_in_logprobs = false,
                         .add_special_tokens = add_special_tokens,
                         .apply_model_defaults = false,
                         .float_fields_are_floats = true};
    BuiltRequest built = BuildGenerateRequest(ctx, {prompt, std::nullopt}, sampling, options);
    if (built.error) return *built.error;
    built.request->sampling.n = 1;
    plan.requests.push_back(std::move(*built.request));
  }
  return plan;
}

void ServeLightLlm(ServerContext& ctx, const json& body, bool stream, bool list_answer,
                   ResponseWriterPtr writer) {
  const bool tgi = ctx.args->GetBool(args::key::kUseTgiApi);
  Serve(ctx, std::move(writer), tgi ? ErrorStyle::kTgi : ErrorStyle::kLightLlm,
        ParseLightLlm(ctx, body, stream, tgi, list_answer));
}

namespace {

// /generate_stream (`forced_stream`) and POST / (the body's "stream" decides): the body with its
// "stream" field taken out.
void ServeLightLlmText(ServerContext& ctx, const std::string& body_text, bool forced_stream,
                       ResponseWriterPtr writer) {
  const ErrorStyle errors =
      ctx.args->GetBool(args::key::kUseTgiApi) ? ErrorStyle::kTgi : ErrorStyle::kLightLlm;
  ApiExpected<json> body = ParseJsonObjectBody(body_text);
  if (!body.ok()) return SendResult(*writer, body, errors);
  auto field = ReadOptionalBool(*body, "stream");
  if (!field.ok()) return SendResult(*writer, InvalidRequest(field.status().message()), errors);
  if (forced_stream && field->has_value() && !**field) {
    return SendResult(*writer, InvalidRequest("/generate_stream always streams: drop \"stream\"."),
                      errors);
  }
  body->erase("stream");
  const bool stream = forced_stream || field->value_or(false);
  // TGI's POST / answers a one-item list.
  ServeLightLlm(ctx, *body, stream, /*list_answer=*/!forced_stream, std::move(writer));
}

}  // namespace

void HandleLightLlmGenerateStream(ServerContext& ctx, const std::string& body,
                                  ResponseWriterPtr writer) {
  ServeLightLlmText(ctx, body, /*forced_stream=*/true, std::move(writer));
}

void HandleLightLlmCompat(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer) {
  ServeLightLlmText(ctx, body, /*forced_stream=*/false, std::move(writer));
}

}  // namespace radixserve::api

#include "api/rtp_llm_api.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "api/json_fields.h"
#include "api/request_builder.h"

namespace radixserve::api {
namespace {

using nlohmann::json;

// GenerateConfig fields radixserve gives their RTP-LLM meaning.
const std::set<std::string, std::less<>>& UsedFields() {
  static const std::set<std::string, std::less<>> used = {"max_new_tokens",
                                                          "top_k",
                                                          "top_p",
                                                          "temperature",
                                                          "do_sample",
                                                          "repetition_penalty",
                                                          "presence_penalty",
                                                          "frequency_penalty",
                                                          "min_new_tokens",
                                                          "random_seed",
                                                          "stop_words_str",
                                                          "stop_words_list",
                                                          "print_stop_words",
                                                          "ignore_eos",
                                                          "skip_special_tokens",
                                                          "json_schema",
                                                          "regex",
                                                          "ebnf",
                                                          "structural_tag",
                                                          "num_return_sequences",
                                                          "return_output_ids",
                                                          "return_input_ids",
                                                          "aux_info",
                                                          "return_incremental",
                                                          "return_cum_log_probs",
                                                          "return_logits",
                                                          "logits_index",
                                                          "return_hidden_states",
                                                          "hidden_states_cut_dim",
                                                          "normalized_hidden_states",
                                                          "adapter_name"};
  return used;
}

// The other GenerateConfig fields (rtp_llm/config/generate_config.py), with RTP-LLM's default:
// accepted at that value only.
const std::map<std::string, json, std::less<>>& DefaultOnlyFields() {
  static const std::map<std::string, json, std::less<>> fields = {
      {"max_input_tokens", 32000},
      {"max_thinking_tokens", 32000},
      {"in_think_mode", false},
      {"thinking_mode", 0},
      {"chat_template_kwargs", nullptr},
      {"begin_think_token_ids", json::array()},
      {"end_think_token_ids", json::array()},
      {"num_beams", 1},
      {"variable_num_beams", json::array()},
      {"no_repeat_ngram_size", nullptr},
      {"combo_token_size", 0},
      {"banned_combo_token_ids", json::array()},
      {"auto_parse_banned_combo", false},
      {"enable_cross_sequence_ban", false},
      {"cross_seq_diverge_start_combo", 0},
      {"top_p_decay", nullptr},
      {"top_p_min", nullptr},
      {"top_p_reset_ids", nullptr},
      {"bad_words_list", nullptr},
      {"eos_token_id", nullptr},
      {"pad_token_id", nullptr},
      {"bos_token_id", nullptr},
      {"using_hf_sampling", false},
      {"timeout_ms", -1},
      {"ttft_timeout_ms", -1},
      {"traffic_reject_priority", 100},
      {"qos_priority", nullptr},
      {"chat_id", nullptr},
      {"task_id", nullptr},
      {"request_format", "raw"},
      {"json_format", false},
      {"response_format", nullptr},
      {"calculate_loss", 0},
      {"return_prompt_logits", false},
      {"prompt_logits_top_k", 64},
      {"prompt_logits_start", -1},
      {"prompt_logits_end", -1},
      {"return_target_logprob", true},
      {"return_all_hidden_states", false},
      {"select_tokens_str", json::array()},
      {"select_tokens_id", json::array()},
      {"md5_value", ""},
      {"custom_prop", "{}"},
      {"sp_advice_prompt", ""},
      {"sp_advice_prompt_token_ids", json::array()},
      {"sp_edit", false},
      {"force_disable_sp_run", false},
      {"force_sp_accept", false},
      {"return_all_probs", 0},
      {"return_softmax_probs", false},
      {"can_use_pd_separation", true},
      {"gen_timeline", false},
      {"profile_step", 3},
      {"profile_trace_name", ""},
      {"out_prefix", ""},
      {"role_addrs", json::array()},
      {"trace_id", ""},
      {"is_streaming", false},
      {"resized_shape", nullptr},
      {"max_pixels", nullptr},
      {"min_pixels", nullptr},
      {"fps", nullptr},
      {"min_frames", nullptr},
      {"max_frames", nullptr},
      {"crop_positions", nullptr},
      {"mm_timeout_ms", nullptr},
      {"add_vision_id", true},
      {"tool_call_message_extract_strategy", "default"},
      {"global_request_id", -1},
      {"reuse_cache", true},
      {"enable_device_cache", true},
      {"enable_memory_cache", true},
      {"enable_remote_cache", true},
      {"group_timeout", nullptr},
      {"unique_key", ""}};
  return fields;
}

// RequestExtractor's aliases of GenerateConfig fields.
std::string_view Canonical(std::string_view key) {
  if (key == "gen_length") return "max_new_tokens";
  if (key == "output_input_ids") return "return_input_ids";
  if (key == "output_logits") return "return_logits";
  if (key == "output_hidden_states") return "return_hidden_states";
  return key;
}

bool IsConfigField(std::string_view key) {
  key = Canonical(key);
  return UsedFields().contains(key) || DefaultOnlyFields().contains(key);
}

std::string Shown(std::string_view key) {
  return key.size() > 64 ? std::string(key.substr(0, 64)) + "..." : std::string(key);
}

ApiError ConfigError(std::string message) {
  return RtpLlmError(std::move(message), "ERROR_GENERATE_CONFIG_FORMAT");
}

// The merged GenerateConfig fields of a request, the streaming flags, and the prompts.
struct RtpRequest {
  json config = json::object();
  bool yield_generator = false;
  bool stream_field = false;  // top-level "stream": true (SSE without the [done] marker)
  bool batch = false;         // prompt_batch
  std::vector<std::string> prompts;
};

std::optional<ApiError> ReadFlag(const json& object, const char* key, bool& target) {
  auto read = ReadOptionalBool(object, key);
  if (!read.ok()) return ConfigError(read.status().message());
  if (*read) target = **read;
  return std::nullopt;
}

ApiExpected<RtpRequest> ReadRequest(const json& body) {
  RtpRequest out;
  json nested = json::object();
  for (const char* key : {"generate_config", "generation_config"}) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_object()) return ConfigError(fmt::format("{} must be an object.", key));
    nested = *it;
    break;
  }
  for (const auto& [key, value] : nested.items()) {
    if (key == "yield_generator") {
      if (auto error = ReadFlag(nested, "yield_generator", out.yield_generator)) return *error;
    } else if (IsConfigField(key)) {
      out.config[std::string(Canonical(key))] = value;
    } else {
      return ConfigError(fmt::format("generate_config got an unexpected field '{}'", Shown(key)));
    }
  }
  static const std::set<std::string, std::less<>> kTopLevel = {
      "prompt",          "prompt_batch", "text", "generate_config", "generation_config",
      "yield_generator", "stream",       "urls", "images"};
  for (const auto& [key, value] : body.items()) {
    if (IsConfigField(key)) {
      out.config[std::string(Canonical(key))] = value;  // top-level fields win, as RTP-LLM
    } else if (!kTopLevel.contains(key)) {
      return RtpLlmError(fmt::format("unexpected field '{}'", Shown(key)),
                         "ERROR_INPUT_FORMAT_ERROR");
    }
  }
  if (auto error = ReadFlag(body, "yield_generator", out.yield_generator)) return *error;
  if (auto error = ReadFlag(body, "stream", out.stream_field)) return *error;
  for (const char* key : {"urls", "images"}) {
    auto it = body.find(key);
    if (it != body.end() && !it->is_null() && !(it->is_array() && it->empty())) {
      return RtpLlmError(
          fmt::format("{} is not supported by radixserve: this model takes text only.", key),
          "UNSUPPORTED_OPERATION");
    }
  }

  const char* list_shape = "prompt batch input should be list";
  if (auto it = body.find("prompt_batch"); it != body.end()) {
    out.batch = true;
    if (!it->is_array()) return RtpLlmError(list_shape, "ERROR_INPUT_FORMAT_ERROR");
    for (const json& item : *it) {
      if (!item.is_string()) {
        return RtpLlmError(
            "prompt_batch must be a list of strings (chat messages are not "
            "supported here: use /v1/chat/completions).",
            "ERROR_INPUT_FORMAT_ERROR");
      }
      out.prompts.push_back(item.get<std::string>());
    }
    if (out.prompts.empty()) return RtpLlmError("prompt_batch is empty.", "NO_PROMPT_ERROR");
    return out;
  }
  auto it = body.find("prompt");
  if (it == body.end()) it = body.find("text");
  if (it == body.end()) {
    return RtpLlmError("can not find prompt or text in request", "NO_PROMPT_ERROR");
  }
  if (it->is_string()) {
    out.prompts.push_back(it->get<std::string>());
  } else if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    out.prompts.push_back((*it)[0].get<std::string>());
  } else if (it->is_array() && it->size() > 1 &&
             std::all_of(it->begin(), it->end(), [](const json& p) { return p.is_string(); })) {
    return RtpLlmError(
        "prompt as a list of several strings is not supported (RTP-LLM answers only the first): "
        "send them as prompt_batch.",
        "UNSUPPORTED_OPERATION");
  } else {
    return RtpLlmError(
        "prompt must be a string (chat messages are not supported here: use "
        "/v1/chat/completions).",
        "ERROR_INPUT_FORMAT_ERROR");
  }
  return out;
}

// The GenerateConfig as SGLang's sampling-params dict (max_new_tokens left out: it is capped per
// prompt) and the options that shape the answer.
struct RtpConfig {
  json sampling = json::object();
  int64_t max_new_tokens = 32000;
  int64_t num_return_sequences = 0;
  bool output_ids = false;
  bool input_ids = false;
  bool aux_info = true;
  bool incremental = false;
  bool cum_log_probs = false;         // return_cum_log_probs
  bool logits = false;                // return_logits
  int64_t logits_index = 0;           // 0: the last token's row
  bool hidden_states = false;         // return_hidden_states
  int64_t hidden_states_cut_dim = 0;  // 0: the whole row
  bool normalized_hidden_states = false;
  std::optional<engine::LoraRef> lora;  // adapter_name
};

ApiExpected<RtpConfig> ReadConfig(const ServerContext& ctx, const json& config) {
  for (const auto& [key, value] : config.items()) {
    auto off = DefaultOnlyFields().find(key);
    if (off == DefaultOnlyFields().end() || value == off->second) continue;
    // A number equal to the default (1 vs 1.0) is the default too.
    if (value.is_number() && off->second.is_number() && !value.is_boolean() &&
        value.get<double>() == off->second.get<double>()) {
      continue;
    }
    return RtpLlmError(fmt::format("generate_config.{} is not supported by radixserve: leave it "
                                   "out or at RTP-LLM's default ({}).",
                                   key, off->second.dump()),
                       "UNSUPPORTED_OPERATION");
  }
  RtpConfig out;
  json& s = out.sampling;
  auto number = [&](const char* key, double fallback) -> ApiExpected<double> {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) return fallback;
    if (it->is_array()) {
      return RtpLlmError(fmt::format("generate_config.{} as a per-request list is not supported "
                                     "by radixserve: give one number.",
                                     key),
                         "UNSUPPORTED_OPERATION");
    }
    if (!it->is_number() || it->is_boolean()) {
      return ConfigError(fmt::format("generate_config.{} must be a number.", key));
    }
    return it->get<double>();
  };
  auto integer = [&](const char* key, int64_t fallback, int64_t min) -> ApiExpected<int64_t> {
    if (auto it = config.find(key); it != config.end() && it->is_array()) {
      return RtpLlmError(fmt::format("generate_config.{} as a per-request list is not supported "
                                     "by radixserve: give one number.",
                                     key),
                         "UNSUPPORTED_OPERATION");
    }
    auto read = ReadOptionalInt(config, key, min);
    if (!read.ok()) return ConfigError(fmt::format("generate_config.{}", read.status().message()));
    return read->value_or(fallback);
  };
  double temperature = 1.0, top_p = 1.0;
  int64_t top_k = 0, min_new = 0;
  RADIX_ASSIGN_OR_RETURN(temperature, number("temperature", 1.0));
  RADIX_ASSIGN_OR_RETURN(top_p, number("top_p", 1.0));
  RADIX_ASSIGN_OR_RETURN(top_k, integer("top_k", 0, 0));
  RADIX_ASSIGN_OR_RETURN(min_new, integer("min_new_tokens", 0, 0));
  RADIX_ASSIGN_OR_RETURN(out.max_new_tokens, integer("max_new_tokens", 32000, 1));
  RADIX_ASSIGN_OR_RETURN(out.num_return_sequences, integer("num_return_sequences", 0, 0));
  for (const char* key : {"repetition_penalty", "presence_penalty", "frequency_penalty"}) {
    if (!config.contains(key) || config[key].is_null()) continue;
    double value = 0.0;
    RADIX_ASSIGN_OR_RETURN(value, number(key, 0.0));
    s[key] = value;
  }
  bool do_sample = true, ignore_eos = false, skip_special = false, print_stop = false;
  for (auto [key, target] :
       {std::pair{"do_sample", &do_sample}, std::pair{"ignore_eos", &ignore_eos},
        std::pair{"skip_special_tokens", &skip_special}, std::pair{"print_stop_words", &print_stop},
        std::pair{"return_output_ids", &out.output_ids},
        std::pair{"return_input_ids", &out.input_ids}, std::pair{"aux_info", &out.aux_info},
        std::pair{"return_incremental", &out.incremental},
        std::pair{"return_cum_log_probs", &out.cum_log_probs},
        std::pair{"return_logits", &out.logits},
        std::pair{"return_hidden_states", &out.hidden_states},
        std::pair{"normalized_hidden_states", &out.normalized_hidden_states}}) {
    if (auto error = ReadFlag(config, key, *target)) return *error;
  }
  RADIX_ASSIGN_OR_RETURN(out.logits_index, integer("logits_index", 0, 1));
  RADIX_ASSIGN_OR_RETURN(out.hidden_states_cut_dim, integer("hidden_states_cut_dim", 0, 0));
  if ((out.logits || out.hidden_states) && out.num_return_sequences > 0) {
    // RTP-LLM's MultiSequencesPipelineResponse has no field for them.
    return RtpLlmError(
        "generate_config.return_logits and return_hidden_states are not returned with "
        "num_return_sequences (RTP-LLM leaves them out): send one request per sequence.",
        "UNSUPPORTED_OPERATION");
  }
  if (temperature < 0.0) return ConfigError("generate_config.temperature must be >= 0.");
  // RTP-LLM samples greedily with do_sample false, top_k 1 or temperature 0.
  if (!do_sample || temperature == 0.0) {
    s["top_k"] = 1;
  } else {
    s["temperature"] = temperature;
    s["top_p"] = top_p;
    if (top_k > 0) s["top_k"] = top_k;
  }
  if (min_new > 0) s["min_new_tokens"] = min_new;
  if (auto seed = ReadOptionalInt(config, "random_seed", 0); !seed.ok()) {
    return ConfigError(fmt::format("generate_config.{}", seed.status().message()));
  } else if (*seed) {
    s["sampling_seed"] = **seed;
  }
  s["ignore_eos"] = ignore_eos;
  s["skip_special_tokens"] = skip_special;
  s["no_stop_trim"] = print_stop;  // print_stop_words false: the stop text is cut off
  if (auto it = config.find("stop_words_str"); it != config.end() && !it->is_null()) {
    if (!it->is_array() ||
        !std::all_of(it->begin(), it->end(), [](const json& word) { return word.is_string(); })) {
      return ConfigError("generate_config.stop_words_str must be a list of strings.");
    }
    if (!it->empty()) s["stop"] = *it;
  }
  if (auto it = config.find("stop_words_list"); it != config.end() && !it->is_null()) {
    if (!it->is_array()) {
      return ConfigError("generate_config.stop_words_list must be a list of lists of token ids.");
    }
    json ids = json::array();
    for (const json& word : *it) {
      auto read = ReadTokenIds(word, "stop_words_list", ctx.model.vocab_size);
      if (!read.ok()) {
        return ConfigError(fmt::format("generate_config.{}", read.status().message()));
      }
      if (read->size() > 1) {
        return RtpLlmError(
            "generate_config.stop_words_list entries of several token ids are not supported by "
            "radixserve: give the stop as stop_words_str, or one token id per list.",
            "UNSUPPORTED_OPERATION");
      }
      if (!read->empty()) ids.push_back((*read)[0]);
    }
    if (!ids.empty()) s["stop_token_ids"] = std::move(ids);
  }
  if (auto it = config.find("adapter_name"); it != config.end() && !it->is_null()) {
    if (!it->is_string()) {
      return RtpLlmError(
          "generate_config.adapter_name must be a string (per-prompt lists are not supported by "
          "radixserve: send one request per adapter).",
          "UNSUPPORTED_OPERATION");
    }
    auto lora = ResolveLora(ctx, it->get<std::string>());
    if (!lora.ok()) return ConfigError(lora.status().message());
    out.lora = *lora;
  }
  int constraints = 0;
  for (const char* key : {"json_schema", "regex", "ebnf", "structural_tag"}) {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) continue;
    const bool text_only = std::string_view(key) == "regex" || std::string_view(key) == "ebnf";
    if (text_only && !it->is_string()) {
      return ConfigError(fmt::format("generate_config.{} must be a string.", key));
    }
    if (!text_only && !it->is_object() && !it->is_string() && !it->is_boolean()) {
      return ConfigError(fmt::format("generate_config.{} must be an object.", key));
    }
    s[key] = it->is_string() ? it->get<std::string>() : it->dump();
    ++constraints;
  }
  if (constraints > 1) {
    return ConfigError("only one of json_schema, regex, ebnf and structural_tag may be set.");
  }
  return out;
}

// RTP-LLM's AuxInfo (rtp_llm/utils/base_model_datatypes.py), every field present as asdict()
// gives it. Filled: cost_time (ms since arrival), iter_count (engine steps that produced a token:
// one per token, radixserve has no speculative decoding), input_len, output_len, reuse_len and
// local_reuse_len (prompt tokens found in the radix cache; radixserve has only the local cache),
// step_output_len and first_token_cost_time (streams only: tokens of the latest event, time to
// the first token), cum_log_probs (with return_cum_log_probs). Left at AuxInfo's defaults:
// prefix_len (no p-tuning prefixes), wait_time (not tracked), pd_sep, beam_responses, softmax_probs
// (not requestable here), the remote / memory / prefill / decode reuse counts (no such caches),
// multimodal_lengths, speculative_*, role_addrs, aux_string.
json AuxInfo(const ChoiceState& choice, double first_token_ms, int64_t step_output_len,
             bool cum_log_probs) {
  // return_cum_log_probs: the sum of the output tokens' log-probabilities, one per sequence.
  json cum = json::array();
  if (cum_log_probs) {
    double sum = 0.0;
    for (const engine::TokenLogprobInfo& info : choice.output_logprobs) {
      if (!std::isnan(info.logprob)) sum += info.logprob;
    }
    cum.push_back(sum);
  }
  const double cost_ms = choice.finished ? choice.e2e_latency_s * 1000.0
                                         : std::chrono::duration<double, std::milli>(
                                               std::chrono::steady_clock::now() - choice.arrival)
                                               .count();
  return {{"cost_time", cost_ms},
          {"iter_count", choice.completion_tokens},
          {"prefix_len", 0},
          {"input_len", choice.prompt_tokens},
          {"output_len", choice.completion_tokens},
          {"step_output_len", step_output_len},
          {"first_token_cost_time", first_token_ms},
          {"wait_time", 0},
          {"pd_sep", false},
          {"cum_log_probs", std::move(cum)},
          {"beam_responses", json::array()},
          {"softmax_probs", json::array()},
          {"reuse_len", choice.cached_tokens},
          {"local_reuse_len", choice.cached_tokens},
          {"remote_reuse_len", 0},
          {"memory_reuse_len", 0},
          {"prefill_total_reuse_len", 0},
          {"prefill_local_reuse_len", 0},
          {"prefill_remote_reuse_len", 0},
          {"prefill_memory_reuse_len", 0},
          {"decode_total_reuse_len", 0},
          {"decode_local_reuse_len", 0},
          {"decode_remote_reuse_len", 0},
          {"decode_memory_reuse_len", 0},
          {"multimodal_lengths", json::object()},
          {"speculative_draft_rounds", 0},
          {"speculative_accepted_tokens_per_pos", json::array()},
          {"role_addrs", json::array()},
          {"aux_string", ""}};
}

// RTP-LLM's answers (frontend_worker.py: PipelineResponse, MultiSequencesPipelineResponse,
// BatchPipelineResponse).
class RtpLlmFormatter final : public ResponseFormatter {
 public:
  struct Options {
    int64_t num_return_sequences = 0;  // 0: one PipelineResponse per prompt
    bool batch = false;
    bool incremental = false;
    bool aux_info = true;
    bool output_ids = false;
    bool input_ids = false;
    bool cum_log_probs = false;
    bool logits = false;
    bool hidden_states = false;
    int64_t hidden_states_cut_dim = 0;
    bool normalized_hidden_states = false;
    std::vector<std::vector<int32_t>> prompt_ids;  // per prompt
  };

  explicit RtpLlmFormatter(Options options) : o_(std::move(options)) {}

  void StreamEvent(const ServerContext&, const std::vector<ChoiceState>& choices, size_t index,
                   const engine::RequestEvent& event, const Emit& emit) override {
    Grow(choices.size());
    const ChoiceState& choice = choices[index];
    if (choice.finish && choice.finish->kind == engine::FinishKind::kAbort &&
        choice.finish->status_code >= 400) {
      ApiError error{choice.finish->status_code, choice.finish->message, "", {}};
      emit(StreamErrorBody(ErrorStyle::kRtpLlm, error));
      return;
    }
    if (first_token_ms_[index] == 0.0 && !event.new_token_ids.empty()) {
      first_token_ms_[index] = std::chrono::duration<double, std::milli>(
                                   std::chrono::steady_clock::now() - choice.arrival)
                                   .count();
    }
    step_output_len_[index] = static_cast<int64_t>(event.new_token_ids.size());
    emit(Answer(choices, o_.incremental));
  }

  void StreamEnd(const ServerContext&, const std::vector<ChoiceState>&, const Emit&) override {}

  FormattedResponse Complete(const ServerContext&,
                             const std::vector<ChoiceState>& choices) override {
    if (auto error = FailedChoice(choices)) {
      return {error->status, ErrorBody(ErrorStyle::kRtpLlm, *error)};
    }
    Grow(choices.size());
    return {200, Answer(choices, /*delta=*/false)};
  }

 private:
  void Grow(size_t n) {
    if (sent_text_.size() == n) return;
    sent_text_.assign(n, 0);
    sent_ids_.assign(n, 0);
    first_token_ms_.assign(n, 0.0);
    step_output_len_.assign(n, 0);
  }

  // The text (and ids) of choice i: all of it, or what was not sent yet.
  std::string Text(const ChoiceState& choice, size_t i, bool delta) {
    if (!delta) return choice.text;
    std::string out = choice.text.substr(std::min(sent_text_[i], choice.text.size()));
    sent_text_[i] = choice.text.size();
    return out;
  }
  json Ids(const ChoiceState& choice, size_t i, bool delta) {
    const size_t from = delta ? std::min(sent_ids_[i], choice.output_ids.size()) : 0;
    if (delta) sent_ids_[i] = choice.output_ids.size();
    return json::array({std::vector<int32_t>(choice.output_ids.begin() + static_cast<long>(from),
                                             choice.output_ids.end())});
  }

  // RTP-LLM's hidden_states: [[row]], the final hidden state the latest token was drawn from
  // (the last fed position's), its first hidden_states_cut_dim values, L2-normalized with
  // normalized_hidden_states.
  json HiddenState(const ChoiceState& choice) const {
    if (choice.hidden_states.empty()) return json::array({json::array()});
    std::vector<float> row = choice.hidden_states.back();
    if (o_.hidden_states_cut_dim > 0 &&
        static_cast<size_t>(o_.hidden_states_cut_dim) < row.size()) {
      row.resize(static_cast<size_t>(o_.hidden_states_cut_dim));
    }
    if (o_.normalized_hidden_states) {
      double norm = 0.0;
      for (float x : row) norm += static_cast<double>(x) * x;
      norm = std::sqrt(norm);
      if (norm > 0.0) {
        for (float& x : row) x = static_cast<float>(x / norm);
      }
    }
    return json::array({std::move(row)});
  }

  json Aux(const ChoiceState& choice, size_t i) const {
    return AuxInfo(choice, first_token_ms_[i], step_output_len_[i], o_.cum_log_probs);
  }

  json PromptAnswer(const std::vector<ChoiceState>& choices, size_t prompt, bool delta) {
    if (o_.num_return_sequences > 0) {
      const auto n = static_cast<size_t>(o_.num_return_sequences);
      json texts = json::array(), aux = json::array();
      bool finished = true;
      for (size_t i = prompt * n; i < (prompt + 1) * n; ++i) {
        texts.push_back(Text(choices[i], i, delta));
        if (o_.aux_info) aux.push_back(Aux(choices[i], i));
        finished = finished && choices[i].finished;
      }
      return {{"response", std::move(texts)}, {"finished", finished}, {"aux_info", std::move(aux)}};
    }
    const ChoiceState& choice = choices[prompt];
    json out = {{"response", Text(choice, prompt, delta)},
                {"finished", choice.finished},
                {"aux_info", o_.aux_info ? Aux(choice, prompt) : json::object()}};
    if (o_.hidden_states) out["hidden_states"] = HiddenState(choice);
    if (o_.logits) out["logits"] = json::array({choice.logits});
    if (o_.output_ids) out["output_ids"] = Ids(choice, prompt, delta);
    if (o_.input_ids) out["input_ids"] = json::array({o_.prompt_ids[prompt]});
    return out;
  }

  json Answer(const std::vector<ChoiceState>& choices, bool delta) {
    if (!o_.batch) return PromptAnswer(choices, 0, delta);
    json batch = json::array();
    for (size_t p = 0; p < o_.prompt_ids.size(); ++p) {
      batch.push_back(PromptAnswer(choices, p, delta));
    }
    return {{"response_batch", std::move(batch)}};
  }

  Options o_;
  std::vector<size_t> sent_text_, sent_ids_;
  std::vector<double> first_token_ms_;
  std::vector<int64_t> step_output_len_;
};

}  // namespace

bool IsRtpLlmBody(const json& body) {
  return !body.contains("inputs") && (body.contains("prompt") || body.contains("prompt_batch"));
}

ApiExpected<ServingPlan> ParseRtpLlm(ServerContext& ctx, const json& body) {
  RtpRequest request;
  RADIX_ASSIGN_OR_RETURN(request, ReadRequest(body));
  RtpConfig config;
  RADIX_ASSIGN_OR_RETURN(config, ReadConfig(ctx, request.config));
  const bool stream = request.yield_generator || request.stream_field;
  if (!stream && config.incremental) {
    return RtpLlmError("request is non_stream but use incremental decoder",
                       "ERROR_INPUT_FORMAT_ERROR");
  }
  if (config.num_return_sequences > 0) {
    auto n = CheckN(json(config.num_return_sequences), ctx.limits, "num_return_sequences");
    if (!n.ok()) return RtpLlmError(n.status().message(), "ERROR_GENERATE_CONFIG_FORMAT");
  }
  if (ctx.tokenizer == nullptr) {
    return RtpLlmError(
        "The tokenizer is not initialized (--skip-tokenizer-init): RTP-LLM's API "
        "takes text prompts.",
        "UNSUPPORTED_OPERATION");
  }
  ServingPlan plan;
  plan.stream = stream;
  plan.end_marker = !request.stream_field;
  plan.group = static_cast<size_t>(std::max<int64_t>(1, config.num_return_sequences));
  RtpLlmFormatter::Options options{.num_return_sequences = config.num_return_sequences,
                                   .batch = request.batch,
                                   .incremental = config.incremental,
                                   .aux_info = config.aux_info,
                                   .output_ids = config.output_ids,
                                   .input_ids = config.input_ids,
                                   .cum_log_probs = config.cum_log_probs,
                                   .logits = config.logits,
                                   .hidden_states = config.hidden_states,
                                   .hidden_states_cut_dim = config.hidden_states_cut_dim,
                                   .normalized_hidden_states = config.normalized_hidden_states,
                                   .prompt_ids = {}};
  json sampling = config.sampling;
  sampling["n"] = 1;
  const std::string base_rid = NewRid(ctx);
  const bool truncates = ctx.args->GetBool(args::key::kAllowAutoTruncate);
  for (size_t p = 0; p < request.prompts.size(); ++p) {
    auto encoded = ctx.tokenizer->Encode(request.prompts[p],
                                         {.add_special_tokens = true, .parse_special = true});
    std::vector<int32_t> ids(encoded.begin(), encoded.end());
    // RTP-LLM stops a sequence at max_seq_len: max_new_tokens (32000 by default) is capped to
    // what fits the context (radixserve keeps one position free, as SGLang's length check).
    int64_t max_new = config.max_new_tokens;
    const auto input_len = static_cast<int64_t>(ids.size());
    const int64_t context_len = ctx.model.context_len;
    if (!truncates && context_len > 0 && input_len + 1 < context_len) {
      max_new = std::min(max_new, context_len - input_len - 1);
    }
    sampling["max_new_tokens"] = max_new;
    for (size_t s = 0; s < plan.group; ++s) {
      const size_t index = p * plan.group + s;
      BuildOptions build{.rid = request.prompts.size() * plan.group > 1
                                    ? fmt::format("{}_{}", base_rid, index)
                                    : base_rid,
                         .stream = stream,
                         .priority = std::nullopt,
                         .extra_key = {},
                         .lora = config.lora,
                         .return_logprob = config.cum_log_probs,
                         .logprob_start_len = -1,
                         .top_logprobs_num = 0,
                         .token_ids_logprob = {},
                         .return_text_in_logprobs = false,
                         .return_hidden_states = config.hidden_states,
                         .return_entropy = false,
                         .add_special_tokens = true,
                         .apply_model_defaults = false,
                         .float_fields_are_floats = true};
      BuiltRequest built = BuildGenerateRequest(ctx, {std::nullopt, ids}, sampling, build);
      if (built.error) {
        ApiError error = *built.error;
        if (error.type != "Bad Request") error.type = "ERROR_INPUT_FORMAT_ERROR";
        return error;
      }
      built.request->return_logits = config.logits;
      built.request->logits_index = config.logits_index;
      plan.requests.push_back(std::move(*built.request));
    }
    options.prompt_ids.push_back(std::move(ids));
  }
  plan.formatter = std::make_shared<RtpLlmFormatter>(std::move(options));
  return plan;
}

void ServeRtpLlm(ServerContext& ctx, const json& body, ResponseWriterPtr writer) {
  Serve(ctx, std::move(writer), ErrorStyle::kRtpLlm, ParseRtpLlm(ctx, body));
}

}  // namespace radixserve::api

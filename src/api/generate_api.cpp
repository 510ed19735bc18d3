#include "api/generate_api.h"

#include <cmath>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/call_tracker.h"
#include "api/disagg_fields.h"
#include "api/json_body.h"
#include "api/json_fields.h"
#include "api/lightllm_api.h"
#include "api/openai_common.h"
#include "api/request_builder.h"
#include "api/serving.h"
#include "api/session_store.h"

namespace radixserve::api {
namespace {

using nlohmann::json;

// GenerateReqInput's fields; anything else is rejected like an unexpected keyword argument.
// The fields of SGLang's GenerateReqInput (0.5.23), by what radixserve does with them.
enum class FieldUse {
  kUsed,         // read by this handler or the request builder
  kMetadata,     // routing / tracing metadata that cannot change a single server's answer
  kDefaultOnly,  // a feature radixserve does not have: accepted at SGLang's default value (what
                 // clients send unless they ask for it), refused with a 400 naming it otherwise
};

const std::map<std::string, FieldUse, std::less<>>& Fields() {
  using enum FieldUse;
  static const std::map<std::string, FieldUse, std::less<>> fields = {
      {"text", kUsed},
      {"input_ids", kUsed},
      {"input_embeds", kUsed},
      {"sampling_params", kUsed},
      {"rid", kUsed},
      {"return_logprob", kUsed},
      {"logprob_start_len", kUsed},
      {"top_logprobs_num", kUsed},
      {"token_ids_logprob", kUsed},
      {"return_text_in_logprobs", kUsed},
      {"stream", kUsed},
      {"priority", kUsed},
      {"extra_key", kUsed},
      {"cache_salt", kUsed},
      // Metadata: the HTTP worker, trace headers, arrival time, router keys.
      {"http_worker_ipc", kMetadata},
      {"external_trace_header", kMetadata},
      {"received_time", kMetadata},
      {"routing_key", kMetadata},
      {"conversation_id", kMetadata},
      {"session_id", kMetadata},
      {"log_metrics", kUsed},
      // SGLang's router (sglang-router) names the model it routed for; one server serves one.
      {"model", kMetadata},
      // Multimodal inputs, LoRA, disaggregation, sessions, hidden states and the rest.
      {"image_data", kDefaultOnly},
      {"video_data", kDefaultOnly},
      {"audio_data", kDefaultOnly},
      {"mm_hashes", kDefaultOnly},
      {"mm_content_hashes", kDefaultOnly},
      {"use_audio_in_video", kDefaultOnly},
      {"video_config", kDefaultOnly},
      {"watermark", kDefaultOnly},
      {"return_sampling_mask", kDefaultOnly},
      {"sampling_logprobs_mode", kDefaultOnly},
      {"return_flat_raw_top_logprobs", kDefaultOnly},
      {"return_flat_raw_output_top_logprobs", kDefaultOnly},
      {"return_flat_raw_top_logprobs_b64", kDefaultOnly},
      {"return_hidden_states", kUsed},
      {"return_routed_experts", kDefaultOnly},
      {"routed_experts_start_len", kDefaultOnly},
      {"return_indexer_topk", kDefaultOnly},
      {"modalities", kDefaultOnly},
      {"session_params", kUsed},
      {"lora_path", kUsed},
      {"lora_id", kDefaultOnly},
      {"custom_logit_processor", kDefaultOnly},
      {"positional_embed_overrides", kDefaultOnly},
      {"bootstrap_host", kUsed},
      {"bootstrap_port", kUsed},
      {"bootstrap_room", kUsed},
      {"bootstrap_pair_key", kDefaultOnly},
      {"decode_tp_size", kDefaultOnly},
      {"routed_dp_rank", kUsed},
      {"data_parallel_rank", kUsed},
      {"disagg_prefill_dp_rank", kDefaultOnly},
      {"background", kDefaultOnly},
      {"require_reasoning", kDefaultOnly},
      {"max_thinking_tokens", kDefaultOnly},
      {"no_logs", kUsed},
      {"custom_labels", kUsed},
      {"return_bytes", kDefaultOnly},
      {"return_entropy", kUsed},
      {"return_prompt_token_ids", kDefaultOnly},
      {"need_wait_for_mm_inputs", kDefaultOnly},
      {"num_items_assigned", kDefaultOnly},
      {"encoder_urls", kDefaultOnly},
      {"max_dynamic_patch", kDefaultOnly},
      {"min_dynamic_patch", kDefaultOnly},
      {"image_max_dynamic_patch", kDefaultOnly},
      {"video_max_dynamic_patch", kDefaultOnly},
      {"images_config", kDefaultOnly},
      {"mm_processor_kwargs", kDefaultOnly},
      {"multi_item_delimiter_indices", kDefaultOnly},
      {"token_indices_to_pool", kDefaultOnly},
      {"kv_hints", kDefaultOnly},
  };
  return fields;
}

// SGLang's defaults for these fields are None, False or 0 (an empty list or object says the same).
bool IsDefaultValue(const json& value) {
  return value.is_null() || (value.is_boolean() && !value.get<bool>()) ||
         (value.is_number() && value == 0) || (value.is_array() && value.empty()) ||
         (value.is_object() && value.empty());
}

// 400 for a field SGLang does not have, or a feature radixserve does not have asked for.
std::optional<std::string> CheckFields(const json& body) {
  for (const auto& [key, value] : body.items()) {
    auto it = Fields().find(key);
    const std::string shown = key.size() > 64 ? key.substr(0, 64) + "..." : key;
    if (it == Fields().end()) {
      return fmt::format("GenerateReqInput got an unexpected field '{}'", shown);
    }
    if (it->second == FieldUse::kDefaultOnly && !IsDefaultValue(value)) {
      return fmt::format(
          "'{}' is not supported by radixserve: send it unset (null/false) or "
          "leave it out.",
          shown);
    }
  }
  return std::nullopt;
}

json FinishReasonJson(const ChoiceState& choice) {
  if (!choice.finish) return nullptr;
  const engine::FinishReason& reason = *choice.finish;
  switch (reason.kind) {
    case engine::FinishKind::kStop: {
      json matched = nullptr;
      if (reason.matched_str) matched = *reason.matched_str;
      if (reason.matched_token) matched = *reason.matched_token;
      return {{"type", "stop"}, {"matched", matched}};
    }
    case engine::FinishKind::kLength:
      return {{"type", "length"}, {"length", choice.completion_tokens}};
    case engine::FinishKind::kAbort: {
      json out = {{"type", "abort"}, {"message", reason.message}};
      if (reason.status_code) out["status_code"] = reason.status_code;
      return out;
    }
  }
  return nullptr;
}

json Triple(const ServerContext& ctx, float logprob, int32_t token, bool with_text) {
  json lp = std::isnan(logprob) ? json(nullptr) : json(logprob);
  return json::array({lp, token, with_text ? json(TokenText(ctx, token)) : json(nullptr)});
}

// SGLang's meta_info logprob lists for one side (input or output).
void AddLogprobs(const ServerContext& ctx, const engine::GenerateRequest& req,
                 const std::vector<engine::TokenLogprobInfo>& infos, const std::string& side,
                 json& meta) {
  const bool text = req.return_text_in_logprobs;
  json tokens = json::array();
  json tops = json::array();
  json ids = json::array();
  for (const auto& info : infos) {
    tokens.push_back(Triple(ctx, info.logprob, info.token_id, text));
    if (req.top_logprobs_num > 0) {
      json top = json::array();
      for (const auto& [id, lp] : info.top) top.push_back(Triple(ctx, lp, id, text));
      tops.push_back(std::move(top));
    }
    if (!req.token_ids_logprob.empty()) {
      json row = json::array();
      for (size_t k = 0; k < info.token_ids_logprobs.size(); ++k) {
        row.push_back(Triple(ctx, info.token_ids_logprobs[k], req.token_ids_logprob[k], text));
      }
      ids.push_back(std::move(row));
    }
  }
  meta[side + "_token_logprobs"] = std::move(tokens);
  if (req.top_logprobs_num > 0) meta[side + "_top_logprobs"] = std::move(tops);
  if (!req.token_ids_logprob.empty()) meta[side + "_token_ids_logprobs"] = std::move(ids);
}

// SGLang's meta_info.hidden_states: the prompt's rows as one [prompt_tokens][hidden] list, then
// one [hidden] row per output token fed back (every output token but the last).
json HiddenStatesJson(const ChoiceState& choice) {
  json out = json::array();
  const size_t prompt =
      std::min(choice.hidden_states.size(), static_cast<size_t>(choice.prompt_tokens));
  json prompt_rows = json::array();
  for (size_t i = 0; i < prompt; ++i) prompt_rows.push_back(choice.hidden_states[i]);
  out.push_back(std::move(prompt_rows));
  for (size_t i = prompt; i < choice.hidden_states.size(); ++i) {
    out.push_back(choice.hidden_states[i]);
  }
  return out;
}

// Per-item request options the formatter needs after submission.
struct ItemInfo {
  engine::GenerateRequest shape;  // logprob options only (ids and sampling not needed)
};

}  // namespace

nlohmann::json MetaInfoJson(const ServerContext& ctx, const ChoiceState& choice,
                            const engine::GenerateRequest& shape) {
  json meta = {{"id", choice.rid},
               {"finish_reason", FinishReasonJson(choice)},
               {"prompt_tokens", choice.prompt_tokens},
               {"completion_tokens", choice.completion_tokens},
               {"cached_tokens", choice.cached_tokens},
               {"weight_version", ctx.weight_version.Get()},
               {"total_retractions", 0}};
  if (choice.finished) meta["e2e_latency"] = choice.e2e_latency_s;
  if (choice.storage_cached_tokens >= 0) {
    meta["cached_tokens_details"] = openai::CachedTokensDetails(choice);
  }
  if (choice.spec_verify_ct) meta["spec_verify_ct"] = *choice.spec_verify_ct;
  if (shape.return_logprob) {
    AddLogprobs(ctx, shape, choice.input_logprobs, "input", meta);
    AddLogprobs(ctx, shape, choice.output_logprobs, "output", meta);
  }
  if (shape.return_entropy) meta["output_token_entropy"] = choice.output_entropy;
  if (shape.return_hidden_states && choice.finished)
    meta["hidden_states"] = HiddenStatesJson(choice);
  return meta;
}

namespace {

// One item of the answer. With `ids_sent` (--stream-output), output_ids holds only the ids after
// *ids_sent, and the cursor moves to the end.
json ItemJson(const ServerContext& ctx, const ChoiceState& choice, const ItemInfo& info,
              size_t* ids_sent, std::optional<size_t> index) {
  json meta = MetaInfoJson(ctx, choice, info.shape);
  json ids;
  if (ids_sent != nullptr) {
    ids = std::vector<int32_t>(choice.output_ids.begin() + static_cast<std::ptrdiff_t>(*ids_sent),
                               choice.output_ids.end());
    *ids_sent = choice.output_ids.size();
  } else {
    ids = choice.output_ids;
  }
  json out = {
      {"text", choice.text}, {"output_ids", std::move(ids)}, {"meta_info", std::move(meta)}};
  if (index) out["index"] = *index;
  return out;
}

// The value of `field` for batch item i: a scalar applies to every item, a list gives one each
// (`per_item_lists`: whether a list means one value per item rather than one list-valued field).
// Null when absent.
Expected<const json*> ItemValue(const json& body, const char* field, size_t i, bool batch,
                                bool per_item_lists) {
  static const json kNull;
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return &kNull;
  if (batch && per_item_lists && it->is_array()) {
    if (i >= it->size()) {
      return InvalidArgument(fmt::format("The length of {} does not match the batch size.", field));
    }
    return &(*it)[i];
  }
  return &*it;
}

// One batch item's logprob options, each checked against its range.
struct ItemOptions {
  json sampling;
  bool return_logprob = false;
  bool return_text = false;
  bool return_hidden_states = false;
  bool return_entropy = false;
  int64_t logprob_start_len = -1;
  int64_t top_logprobs_num = 0;
  std::vector<int32_t> token_ids_logprob;
};

Expected<ItemOptions> ReadItemOptions(const ServerContext& ctx, const json& body, size_t i,
                                      bool batch) {
  ItemOptions out;
  const json* value = nullptr;
  RADIX_ASSIGN_OR_RETURN(value, ItemValue(body, "sampling_params", i, batch, true));
  if (!value->is_null() && !value->is_object()) {
    return InvalidArgument("sampling_params must be an object (or a list of objects for a batch).");
  }
  out.sampling = *value;
  // The per-item flags: a boolean (every item) or a list of booleans, one per item.
  for (auto [field, flag] : {std::pair{"return_logprob", &out.return_logprob},
                             {"return_text_in_logprobs", &out.return_text},
                             {"return_hidden_states", &out.return_hidden_states},
                             {"return_entropy", &out.return_entropy}}) {
    RADIX_ASSIGN_OR_RETURN(value, ItemValue(body, field, i, batch, true));
    if (!value->is_null() && !value->is_boolean()) {
      return InvalidArgument(fmt::format("{} must be a boolean.", field));
    }
    *flag = value->is_boolean() && value->get<bool>();
  }
  if (out.return_hidden_states && !ctx.args->GetBool(args::key::kEnableReturnHiddenStates)) {
    return InvalidArgument(
        "The server is not configured to return the hidden states. Please set "
        "`--enable-return-hidden-states` to enable this feature.");
  }
  RADIX_ASSIGN_OR_RETURN(value, ItemValue(body, "logprob_start_len", i, batch, true));
  if (!value->is_null()) {
    RADIX_ASSIGN_OR_RETURN(out.logprob_start_len,
                           ReadInt(*value, "logprob_start_len", -1, ctx.model.context_len));
  }
  RADIX_ASSIGN_OR_RETURN(value, ItemValue(body, "top_logprobs_num", i, batch, true));
  if (!value->is_null()) {
    RADIX_ASSIGN_OR_RETURN(out.top_logprobs_num,
                           ReadInt(*value, "top_logprobs_num", 0, ctx.limits.max_top_logprobs));
  }
  // token_ids_logprob is a list already: a batch gives a list of lists.
  RADIX_ASSIGN_OR_RETURN(value, ItemValue(body, "token_ids_logprob", i,
                                          batch && body.contains("token_ids_logprob") &&
                                              body["token_ids_logprob"].is_array() &&
                                              !body["token_ids_logprob"].empty() &&
                                              body["token_ids_logprob"][0].is_array(),
                                          true));
  if (!value->is_null()) {
    RADIX_ASSIGN_OR_RETURN(out.token_ids_logprob,
                           ReadTokenIds(*value, "token_ids_logprob", ctx.model.vocab_size));
    // Each listed id adds an entry per position, like top_logprobs_num does.
    if (static_cast<int64_t>(out.token_ids_logprob.size()) > ctx.limits.max_top_logprobs) {
      return InvalidArgument(fmt::format(
          "token_ids_logprob may list at most {} token ids (the server's --max-top-logprobs).",
          ctx.limits.max_top_logprobs));
    }
  }
  return out;
}

// The prompts of a /generate body: text (str | [str]) or input_ids ([int] | [[int]]); ids win.
Expected<std::vector<PromptInput>> ReadPrompts(const ServerContext& ctx, const json& body,
                                               bool& batch) {
  std::vector<PromptInput> prompts;
  batch = false;
  auto ids = body.find("input_ids");
  auto text = body.find("text");
  if (ids != body.end() && !ids->is_null()) {
    if (!ids->is_array()) return InvalidArgument("input_ids must be a list of token ids.");
    if (!ids->empty() && (*ids)[0].is_array()) {
      batch = true;
      for (const json& row : *ids) {
        std::vector<int32_t> row_ids;
        RADIX_ASSIGN_OR_RETURN(row_ids, ReadTokenIds(row, "input_ids", ctx.model.vocab_size));
        prompts.push_back({std::nullopt, std::move(row_ids)});
      }
    } else {
      std::vector<int32_t> row_ids;
      RADIX_ASSIGN_OR_RETURN(row_ids, ReadTokenIds(*ids, "input_ids", ctx.model.vocab_size));
      prompts.push_back({std::nullopt, std::move(row_ids)});
    }
  } else if (text != body.end() && !text->is_null()) {
    if (text->is_array()) {
      batch = true;
      for (const json& t : *text) {
        if (!t.is_string()) return InvalidArgument("text must be a string or a list of strings.");
        prompts.push_back({t.get<std::string>(), std::nullopt});
      }
    } else if (text->is_string()) {
      prompts.push_back({text->get<std::string>(), std::nullopt});
    } else {
      return InvalidArgument("text must be a string or a list of strings.");
    }
  }
  return prompts;
}

// The prefix-cache namespace of batch item i: `extra_key` is a string (every item) or a list.
// SGLang 0.5.23 also takes cache_salt (same shapes); the namespace is cache_salt + extra_key, as
// on the OpenAI routes.
Expected<std::string> ItemKey(const json& body, const char* key, size_t i, size_t items) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array() && it->size() == items && (*it)[i].is_string()) {
    return (*it)[i].get<std::string>();
  }
  return InvalidArgument(
      fmt::format("{} must be a string or a list of strings, one per prompt.", key));
}

Expected<std::string> ItemExtraKey(const json& body, size_t i, size_t items) {
  RADIX_ASSIGN_OR_RETURN(auto salt, ItemKey(body, "cache_salt", i, items));
  RADIX_ASSIGN_OR_RETURN(auto extra, ItemKey(body, "extra_key", i, items));
  return salt + extra;
}

// The LoRA adapter name of batch item i: `lora_path` is a string (every item), or a list of
// strings or nulls, one per prompt; null or absent: the base model.
Expected<std::optional<std::string>> ItemLoraName(const json& body, size_t i, size_t items) {
  auto it = body.find("lora_path");
  if (it == body.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_array() && it->size() == items && ((*it)[i].is_string() || (*it)[i].is_null())) {
    if ((*it)[i].is_null()) return std::optional<std::string>();
    return std::optional<std::string>((*it)[i].get<std::string>());
  }
  return InvalidArgument(
      "lora_path must be a string, or a list of strings (or nulls), one per prompt.");
}

// The rid of batch item i: a string rid becomes "{rid}_{i}" in a batch; a list gives one each.
Expected<std::string> ItemRid(ServerContext& ctx, const json& body, size_t i, size_t items,
                              bool batch) {
  auto it = body.find("rid");
  if (it == body.end() || it->is_null()) return NewRid(ctx);
  if (it->is_string()) {
    if (it->get_ref<const std::string&>().empty()) {
      return InvalidArgument("rid must be a non-empty string.");
    }
    return batch ? fmt::format("{}_{}", it->get<std::string>(), i) : it->get<std::string>();
  }
  if (it->is_array()) {
    if (it->size() != items) {
      return InvalidArgument("The length of rid does not match the batch size.");
    }
    const json& item = (*it)[i];
    if (!item.is_string() || item.get_ref<const std::string&>().empty()) {
      return InvalidArgument("rid must be a non-empty string or a list of them.");
    }
    return item.get<std::string>();
  }
  return InvalidArgument("rid must be a non-empty string or a list of them.");
}

// SGLang's session_params ({id, rid, offset, replace, drop_previous_output}); none when absent,
// null, or without an id (SGLang then serves the request outside any session).
Expected<std::optional<SessionParams>> ReadSessionParams(const json& body) {
  auto it = body.find("session_params");
  if (it == body.end() || it->is_null()) return std::optional<SessionParams>();
  if (!it->is_object()) {
    return InvalidArgument("session_params must be an object (a batch cannot use sessions).");
  }
  SessionParams params;
  RADIX_ASSIGN_OR_RETURN(auto id, ReadOptionalString(*it, "id"));
  if (!id.has_value()) return std::optional<SessionParams>();
  params.id = *id;
  RADIX_ASSIGN_OR_RETURN(auto rid, ReadOptionalString(*it, "rid"));
  params.rid = rid;
  RADIX_ASSIGN_OR_RETURN(auto offset, ReadOptionalInt(*it, "offset"));
  params.offset = offset.value_or(0);
  RADIX_ASSIGN_OR_RETURN(auto replace, ReadOptionalBool(*it, "replace"));
  params.replace = replace.value_or(false);
  RADIX_ASSIGN_OR_RETURN(auto drop, ReadOptionalBool(*it, "drop_previous_output"));
  params.drop_previous_output = drop.value_or(false);
  for (const auto& [key, value] : it->items()) {
    if (key != "id" && key != "rid" && key != "offset" && key != "replace" &&
        key != "drop_previous_output") {
      return InvalidArgument(fmt::format("session_params got an unexpected field '{}'",
                                         key.size() > 64 ? key.substr(0, 64) + "..." : key));
    }
  }
  return std::optional<SessionParams>(std::move(params));
}

// Continues a session with the plan's one request: its prompt becomes the session's history plus
// its own tokens, and its output is recorded when it ends.
ApiExpected<bool> JoinSession(ServerContext& ctx, const SessionParams& params, ServingPlan& plan) {
  if (plan.requests.size() != 1) {
    return InvalidRequest("session_params applies to a single request: not to a batch or n > 1.");
  }
  if (ctx.sessions == nullptr) return BadRequest("Sessions are not available on this server.");
  engine::GenerateRequest& request = plan.requests[0];
  std::optional<int32_t> bos;
  if (ctx.tokenizer != nullptr && ctx.tokenizer->bos_id()) {
    bos = static_cast<int32_t>(*ctx.tokenizer->bos_id());
  }
  Expected<SessionTurn> turn =
      ctx.sessions->Begin(params, request.rid, std::move(request.input_ids), bos);
  if (!turn.ok()) return BadRequest(turn.status().message());
  request.input_ids = std::move(turn->input_ids);
  for (const std::string& rid : turn->aborted) {
    ctx.engine->Abort(rid, engine::AbortMatch::kExactRid);
  }
  plan.on_end = [sessions = ctx.sessions, id = params.id,
                 rid = request.rid](const std::vector<ChoiceState>* choices) {
    if (choices == nullptr || choices->empty()) return sessions->Drop(id, rid);
    const ChoiceState& choice = choices->front();
    const bool completed = choice.finish && choice.finish->kind != engine::FinishKind::kAbort;
    sessions->Finish(id, rid, choice.output_ids, completed);
  };
  return true;
}

// /generate's answers: one item per request (a list for a batch or n > 1); streamed items carry
// the cumulative text, and with --stream-output only the new output ids.
class GenerateFormatter final : public ResponseFormatter {
 public:
  GenerateFormatter(std::vector<ItemInfo> infos, bool batch, bool stream_output)
      : infos_(std::move(infos)),
        batch_(batch),
        indexed_(infos_.size() > 1),
        stream_output_(stream_output),
        ids_sent_(infos_.size(), 0) {}

  void StreamEvent(const ServerContext& ctx, const std::vector<ChoiceState>& choices, size_t index,
                   const engine::RequestEvent& event, const Emit& emit) override {
    const ChoiceState& choice = choices[index];
    if (event.finished && choice.finish && choice.finish->kind == engine::FinishKind::kAbort &&
        choice.finish->status_code >= 400) {
      emit(ApiError{choice.finish->status_code, choice.finish->message, {}, {}}.NativeBody());
      return;
    }
    emit(ItemJson(ctx, choice, infos_[index], stream_output_ ? &ids_sent_[index] : nullptr,
                  indexed_ ? std::optional<size_t>(index) : std::nullopt));
  }

  void StreamEnd(const ServerContext&, const std::vector<ChoiceState>&, const Emit&) override {}

  FormattedResponse Complete(const ServerContext& ctx,
                             const std::vector<ChoiceState>& choices) override {
    // A request that failed after admission answers with its error status when it is alone.
    if (choices.size() == 1 && choices[0].finish &&
        choices[0].finish->kind == engine::FinishKind::kAbort &&
        choices[0].finish->status_code >= 400) {
      ApiError error{choices[0].finish->status_code, choices[0].finish->message, {}, {}};
      return {error.status, error.NativeBody()};
    }
    if (!batch_ && !indexed_) return {200, ItemJson(ctx, choices[0], infos_[0], nullptr, {})};
    json out = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      out.push_back(ItemJson(ctx, choices[i], infos_[i], nullptr, std::nullopt));
    }
    return {200, std::move(out)};
  }

 private:
  std::vector<ItemInfo> infos_;
  bool batch_;
  bool indexed_;
  bool stream_output_;
  std::vector<size_t> ids_sent_;
};

}  // namespace

ApiExpected<ServingPlan> ParseGenerate(ServerContext& ctx, const json& body) {
  if (auto refused = CheckFields(body)) return InvalidRequest(*refused);
  if (body.contains("input_embeds") && !body["input_embeds"].is_null()) {
    return BadRequest("input_embeds is not supported by radixserve.");
  }
  auto invalid = [](const Status& status) { return InvalidRequest(status.message()); };

  bool batch = false;
  auto prompts = ReadPrompts(ctx, body, batch);
  if (!prompts.ok()) return invalid(prompts.status());
  if (prompts->empty()) {
    return BadRequest("Either text, input_ids or input_embeds should be provided.");
  }
  auto stream_field = ReadOptionalBool(body, "stream");
  if (!stream_field.ok()) return invalid(stream_field.status());
  const bool stream = stream_field->value_or(false);
  auto priority = ReadOptionalInt(body, "priority");
  if (!priority.ok()) return invalid(priority.status());
  auto dp_rank = ReadRoutedDpRank(ctx, body);
  if (!dp_rank.ok()) return invalid(dp_rank.status());
  auto session = ReadSessionParams(body);
  if (!session.ok()) return invalid(session.status());
  auto labels = ReadBodyLabels(body);
  if (!labels.ok()) return invalid(labels.status());
  auto log_metrics = ReadOptionalBool(body, "log_metrics");
  if (!log_metrics.ok()) return invalid(log_metrics.status());
  auto no_logs = ReadOptionalBool(body, "no_logs");
  if (!no_logs.ok()) return invalid(no_logs.status());

  // Everything is read and bounded before any prompt is tokenized or copied n times.
  std::vector<ItemOptions> items;
  std::vector<int64_t> item_n;
  int64_t total_requests = 0;
  for (size_t i = 0; i < prompts->size(); ++i) {
    auto options = ReadItemOptions(ctx, body, i, batch);
    if (!options.ok()) return invalid(options.status());
    int64_t n = 1;
    if (options->sampling.is_object() && options->sampling.contains("n") &&
        !options->sampling["n"].is_null()) {
      auto read = CheckN(options->sampling["n"], ctx.limits);
      if (!read.ok()) return invalid(read.status());
      n = *read;
    }
    total_requests += n;
    if (total_requests > ctx.limits.max_requests_per_call) {
      return InvalidRequest(fmt::format(
          "The request asks for more than {} generations (prompts x n); the server's limit is "
          "--max-requests-per-call.",
          ctx.limits.max_requests_per_call));
    }
    items.push_back(std::move(*options));
    item_n.push_back(n);
  }

  ServingPlan plan;
  plan.stream = stream;
  std::vector<ItemInfo> infos;
  std::optional<int64_t> group_n;  // n shared by every item (SGLang requires that), else 1
  for (size_t i = 0; i < prompts->size(); ++i) {
    const ItemOptions& item = items[i];
    auto base_rid = ItemRid(ctx, body, i, prompts->size(), batch);
    if (!base_rid.ok()) return invalid(base_rid.status());
    auto extra_key = ItemExtraKey(body, i, prompts->size());
    if (!extra_key.ok()) return invalid(extra_key.status());
    auto lora_name = ItemLoraName(body, i, prompts->size());
    if (!lora_name.ok()) return invalid(lora_name.status());
    auto lora = ResolveLora(ctx, *lora_name);
    if (!lora.ok()) return invalid(lora.status());
    const int64_t n = item_n[i];
    group_n = (!group_n || *group_n == n) ? n : 1;
    for (int64_t j = 0; j < n; ++j) {
      BuildOptions options{.rid = n > 1 ? fmt::format("{}_{}", *base_rid, j) : *base_rid,
                           .stream = stream,
                           .priority = *priority,
                           .extra_key = *extra_key,
                           .lora = *lora,
                           .return_logprob = item.return_logprob,
                           .logprob_start_len = item.logprob_start_len,
                           .top_logprobs_num = static_cast<int32_t>(item.top_logprobs_num),
                           .token_ids_logprob = item.token_ids_logprob,
                           .return_text_in_logprobs = item.return_text,
                           .return_hidden_states = item.return_hidden_states,
                           .return_entropy = item.return_entropy};
      BuiltRequest built = BuildGenerateRequest(ctx, (*prompts)[i], item.sampling, options);
      if (built.error) return *built.error;
      built.request->sampling.n = 1;  // the n copies are separate engine requests
      if (*dp_rank) built.request->routed_dp_rank = **dp_rank;
      ItemInfo info;
      info.shape.return_hidden_states = item.return_hidden_states;
      info.shape.return_entropy = item.return_entropy;
      info.shape.return_logprob = item.return_logprob;
      info.shape.top_logprobs_num = static_cast<int32_t>(item.top_logprobs_num);
      info.shape.token_ids_logprob = item.token_ids_logprob;
      info.shape.return_text_in_logprobs = item.return_text;
      infos.push_back(std::move(info));
      plan.requests.push_back(std::move(*built.request));
    }
  }
  plan.group = static_cast<size_t>(group_n.value_or(1));
  plan.metric_labels = std::move(*labels);
  plan.log_metrics = log_metrics->value_or(true);
  plan.no_logs = no_logs->value_or(false);
  plan.formatter = std::make_shared<GenerateFormatter>(std::move(infos), batch,
                                                       ctx.args->GetBool(args::key::kStreamOutput));
  if (ApiExpected<bool> applied = ApplyBootstrap(ctx, body, plan); !applied.ok()) {
    return applied.status();
  }
  // Last: a session records the request from here on.
  if (*session) {
    if (ApiExpected<bool> joined = JoinSession(ctx, **session, plan); !joined.ok()) {
      return joined.status();
    }
  }
  return plan;
}

void HandleGenerate(ServerContext& ctx, const std::string& body_text, ResponseWriterPtr writer) {
  ApiExpected<json> body = ParseJsonObjectBody(body_text);
  if (!body.ok()) return SendResult(*writer, body, ErrorStyle::kNative);
  if (IsLightLlmBody(*body)) {
    // LightLLM's /generate; a "stream" field picks its streamed answer, as its POST / does.
    auto stream = ReadOptionalBool(*body, "stream");
    if (!stream.ok()) {
      return SendResult(*writer, InvalidRequest(stream.status().message()), ErrorStyle::kLightLlm);
    }
    body->erase("stream");
    return ServeLightLlm(ctx, *body, stream->value_or(false), /*list_answer=*/false,
                         std::move(writer));
  }
  Serve(ctx, std::move(writer), ErrorStyle::kNative, ParseGenerate(ctx, *body));
}

}  // namespace radixserve::api

#include "api/generate_api.h"

#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/call_tracker.h"
#include "api/request_builder.h"

namespace radixserve::api {
namespace {

using nlohmann::json;

// GenerateReqInput's fields; anything else is rejected like an unexpected keyword argument.
const std::set<std::string>& KnownFields() {
  static const std::set<std::string> fields = {"text",
                                               "input_ids",
                                               "input_embeds",
                                               "image_data",
                                               "video_data",
                                               "audio_data",
                                               "sampling_params",
                                               "rid",
                                               "return_logprob",
                                               "logprob_start_len",
                                               "top_logprobs_num",
                                               "token_ids_logprob",
                                               "return_text_in_logprobs",
                                               "stream",
                                               "log_metrics",
                                               "return_hidden_states",
                                               "modalities",
                                               "session_params",
                                               "lora_path",
                                               "lora_id",
                                               "custom_logit_processor",
                                               "bootstrap_host",
                                               "bootstrap_port",
                                               "bootstrap_room",
                                               "bootstrap_pair_key",
                                               "require_reasoning",
                                               "data_parallel_rank",
                                               "priority",
                                               "extra_key",
                                               "no_logs",
                                               "custom_labels",
                                               "return_entropy",
                                               "background",
                                               "conversation_id"};
  return fields;
}

void SendNativeError(ResponseWriter& writer, const ApiError& error) {
  writer.Send(error.status, "application/json", ToJsonText(error.NativeBody()));
}

void SendValidationError(ResponseWriter& writer, const std::string& message) {
  ApiError error{400, message, "Bad Request", {}};
  writer.Send(400, "application/json", ToJsonText(error.OpenAiBody()));
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

// Per-item request options the formatter needs after submission.
struct ItemInfo {
  engine::GenerateRequest shape;  // logprob options only (ids and sampling not needed)
};

json ItemJson(const ServerContext& ctx, ChoiceState& choice, const ItemInfo& info,
              bool stream_output_slices, std::optional<size_t> index) {
  json meta = {{"id", choice.rid},
               {"finish_reason", FinishReasonJson(choice)},
               {"prompt_tokens", choice.prompt_tokens},
               {"completion_tokens", choice.completion_tokens},
               {"cached_tokens", choice.cached_tokens},
               {"weight_version", ctx.weight_version},
               {"total_retractions", 0}};
  if (choice.finished) meta["e2e_latency"] = choice.e2e_latency_s;
  if (info.shape.return_logprob) {
    AddLogprobs(ctx, info.shape, choice.input_logprobs, "input", meta);
    AddLogprobs(ctx, info.shape, choice.output_logprobs, "output", meta);
  }
  json ids;
  if (stream_output_slices) {
    ids =
        std::vector<int32_t>(choice.output_ids.begin() + choice.ids_sent, choice.output_ids.end());
    choice.ids_sent = choice.output_ids.size();
  } else {
    ids = choice.output_ids;
  }
  json out = {
      {"text", choice.text}, {"output_ids", std::move(ids)}, {"meta_info", std::move(meta)}};
  if (index) out["index"] = *index;
  return out;
}

// Reads `field` of the body for item i: a scalar applies to every item, a list gives one each.
template <typename T>
bool PerItem(const json& body, const char* field, size_t i, bool batch, T fallback, T& out,
             std::string& error) {
  out = fallback;
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return true;
  const json* value = &*it;
  if (batch && it->is_array() && !std::is_same_v<T, std::vector<int32_t>>) {
    if (i >= it->size()) {
      error = fmt::format("The length of {} does not match the batch size.", field);
      return false;
    }
    value = &(*it)[i];
  }
  try {
    out = value->get<T>();
  } catch (const json::exception&) {
    error = fmt::format("Invalid type for field '{}'.", field);
    return false;
  }
  return true;
}

}  // namespace

void HandleGenerate(ServerContext& ctx, const std::string& body_text, ResponseWriterPtr writer) {
  json body = json::parse(body_text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    SendValidationError(*writer, "The request body must be a JSON object.");
    return;
  }
  for (const auto& [key, value] : body.items()) {
    if (!KnownFields().count(key)) {
      SendValidationError(*writer,
                          fmt::format("GenerateReqInput got an unexpected field '{}'", key));
      return;
    }
  }
  if (body.contains("input_embeds") && !body["input_embeds"].is_null()) {
    SendNativeError(*writer, BadRequest("input_embeds is not supported by radixserve."));
    return;
  }

  // Prompts: text (str | [str]) or input_ids ([int] | [[int]]); ids win.
  std::vector<PromptInput> prompts;
  bool batch = false;
  const json& ids = body.value("input_ids", json());
  const json& text = body.value("text", json());
  try {
    if (!ids.is_null()) {
      if (!ids.is_array()) throw json::type_error::create(302, "input_ids", nullptr);
      if (!ids.empty() && ids[0].is_array()) {
        batch = true;
        for (const auto& row : ids)
          prompts.push_back({std::nullopt, row.get<std::vector<int32_t>>()});
      } else {
        prompts.push_back({std::nullopt, ids.get<std::vector<int32_t>>()});
      }
    } else if (!text.is_null()) {
      if (text.is_array()) {
        batch = true;
        for (const auto& t : text) prompts.push_back({t.get<std::string>(), std::nullopt});
      } else {
        prompts.push_back({text.get<std::string>(), std::nullopt});
      }
    }
  } catch (const json::exception&) {
    SendValidationError(*writer,
                        "text must be a string or a list of strings; input_ids a list "
                        "of integers or a list of such lists.");
    return;
  }
  if (prompts.empty()) {
    SendNativeError(*writer,
                    BadRequest("Either text, input_ids or input_embeds should be provided."));
    return;
  }
  if (batch && prompts.empty()) {
    SendNativeError(*writer, BadRequest("The batch is empty."));
    return;
  }

  const bool stream = body.value("stream", false);
  const bool stream_output = ctx.args->GetBool("stream-output");
  std::vector<engine::GenerateRequest> requests;
  std::vector<ItemInfo> infos;
  std::vector<size_t> stream_index;
  std::string error;
  std::optional<int64_t> group_n;  // n shared by every item (SGLang requires that), else 1
  const json& rid_field = body.value("rid", json());
  for (size_t i = 0; i < prompts.size(); ++i) {
    json sampling;
    bool return_logprob = false, return_text = false;
    int64_t start_len = -1, top_num = 0;
    std::vector<int32_t> token_ids_logprob;
    std::optional<int64_t> priority;
    if (!PerItem(body, "sampling_params", i,
                 batch && body.value("sampling_params", json()).is_array(), json(), sampling,
                 error) ||
        !PerItem(body, "return_logprob", i, batch, false, return_logprob, error) ||
        !PerItem(body, "logprob_start_len", i, batch, int64_t{-1}, start_len, error) ||
        !PerItem(body, "top_logprobs_num", i, batch, int64_t{0}, top_num, error) ||
        !PerItem(body, "token_ids_logprob", i, batch, std::vector<int32_t>{}, token_ids_logprob,
                 error) ||
        !PerItem(body, "return_text_in_logprobs", i, batch, false, return_text, error)) {
      SendValidationError(*writer, error);
      return;
    }
    if (body.contains("priority") && body["priority"].is_number_integer()) {
      priority = body["priority"].get<int64_t>();
    }
    std::string base_rid;
    if (rid_field.is_string()) {
      base_rid = batch ? fmt::format("{}_{}", rid_field.get<std::string>(), i)
                       : rid_field.get<std::string>();
    } else if (rid_field.is_array() && i < rid_field.size() && rid_field[i].is_string()) {
      base_rid = rid_field[i].get<std::string>();
    } else {
      base_rid = NewRid(ctx);
    }
    int64_t n = 1;
    if (sampling.is_object() && sampling.contains("n") && sampling["n"].is_number_integer()) {
      n = std::max<int64_t>(1, sampling["n"].get<int64_t>());  // n < 1: Verify reports it
    }
    group_n = (!group_n || *group_n == n) ? n : 1;
    for (int64_t j = 0; j < n; ++j) {
      BuildOptions options{.rid = n > 1 ? fmt::format("{}_{}", base_rid, j) : base_rid,
                           .stream = stream,
                           .priority = priority,
                           .return_logprob = return_logprob,
                           .logprob_start_len = start_len,
                           .top_logprobs_num = static_cast<int32_t>(top_num),
                           .token_ids_logprob = token_ids_logprob,
                           .return_text_in_logprobs = return_text};
      BuiltRequest built = BuildGenerateRequest(ctx, prompts[i], sampling, options);
      if (built.error) {
        SendNativeError(*writer, *built.error);
        return;
      }
      built.request->sampling.n = 1;  // the n copies are separate engine requests
      ItemInfo info;
      info.shape.return_logprob = return_logprob;
      info.shape.top_logprobs_num = static_cast<int32_t>(top_num);
      info.shape.token_ids_logprob = token_ids_logprob;
      info.shape.return_text_in_logprobs = return_text;
      infos.push_back(std::move(info));
      requests.push_back(std::move(*built.request));
    }
  }
  const bool indexed = requests.size() > 1;

  if (stream) writer->StartStream();
  auto on_event = [infos, stream, stream_output, indexed](CallTracker& call, size_t index,
                                                          const engine::RequestEvent& event) {
    if (!stream) return;
    ChoiceState& choice = call.choices()[index];
    if (event.finished && choice.finish && choice.finish->kind == engine::FinishKind::kAbort &&
        choice.finish->status_code >= 400) {
      call.writer().SendEvent(ToJsonText(json{{"error", {{"message", choice.finish->message}}}}));
      return;
    }
    call.writer().SendEvent(
        ToJsonText(ItemJson(call.context(), choice, infos[index], stream_output,
                            indexed ? std::optional<size_t>(index) : std::nullopt)));
  };
  auto on_done = [infos, stream, batch, indexed](CallTracker& call) {
    if (stream) {
      call.writer().SendEvent("[DONE]");
      call.writer().EndStream();
      return;
    }
    auto& choices = call.choices();
    // A request that failed after admission answers with its error status when it is alone.
    if (choices.size() == 1 && choices[0].finish &&
        choices[0].finish->kind == engine::FinishKind::kAbort &&
        choices[0].finish->status_code >= 400) {
      ApiError error{choices[0].finish->status_code, choices[0].finish->message, "BadRequest", {}};
      call.writer().Send(error.status, "application/json", ToJsonText(error.NativeBody()));
      return;
    }
    json out;
    if (batch || indexed) {
      out = json::array();
      for (size_t i = 0; i < choices.size(); ++i) {
        out.push_back(ItemJson(call.context(), choices[i], infos[i], false, std::nullopt));
      }
    } else {
      out = ItemJson(call.context(), choices[0], infos[0], false, std::nullopt);
    }
    call.writer().Send(200, "application/json", ToJsonText(out));
  };
  auto on_rejected = [writer, stream](const ApiError& error) {
    if (stream) {
      writer->SendEvent(ToJsonText(json{{"error", {{"message", error.message}}}}));
      writer->SendEvent("[DONE]");
      writer->EndStream();
    } else {
      writer->Send(error.status, "application/json", ToJsonText(error.OpenAiBody()));
    }
  };
  CallTracker::Start(ctx, writer, std::move(requests), on_event, on_done, on_rejected,
                     static_cast<size_t>(group_n.value_or(1)));
}

}  // namespace radixserve::api

#include "api/openai_common.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "api/json_fields.h"
#include "api/request_builder.h"

namespace radixserve::api::openai {
namespace {

std::string WrongType(const char* key, const char* expected) {
  return fmt::format("Invalid value for '{}': expected {}.", key, expected);
}

// A string or a list of strings (stop, stop_regex).
bool IsStringOrStrings(const json& value) {
  return value.is_string() ||
         (value.is_array() &&
          std::all_of(value.begin(), value.end(), [](const json& s) { return s.is_string(); }));
}

json SamplingFromOpenAi(FieldReader& reader, const json& body,
                        const nlohmann::ordered_json& ordered_body) {
  json sampling = json::object();
  for (const char* key : {"temperature", "top_p", "min_p", "frequency_penalty", "presence_penalty",
                          "repetition_penalty"}) {
    if (reader.Number(body, key)) sampling[key] = body[key];
  }
  if (auto v = reader.Int(body, "top_k")) sampling["top_k"] = *v;
  if (auto v = reader.Int(body, "min_tokens")) sampling["min_new_tokens"] = *v;
  if (auto v = reader.Int(body, "seed")) sampling["sampling_seed"] = *v;
  for (const char* key :
       {"ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim"}) {
    if (auto v = reader.Bool(body, key)) sampling[key] = *v;
  }
  for (const char* key : {"stop", "stop_regex"}) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    if (!IsStringOrStrings(*it)) {
      reader.Fail(InvalidRequest(WrongType(key, "a string or a list of strings")));
    } else {
      sampling[key] = *it;
    }
  }
  if (auto it = body.find("stop_token_ids"); it != body.end() && !it->is_null()) {
    if (!it->is_array() || !std::all_of(it->begin(), it->end(),
                                        [](const json& id) { return id.is_number_integer(); })) {
      reader.Fail(InvalidRequest(WrongType("stop_token_ids", "a list of integers")));
    } else {
      sampling["stop_token_ids"] = *it;
    }
  }
  // SGLang's extra-body constraints. A schema may come as a JSON object or as its text, and is
  // passed on with the client's key order.
  if (auto v = reader.String(body, "regex")) sampling["regex"] = *v;
  if (auto v = reader.String(body, "ebnf")) sampling["ebnf"] = *v;
  if (auto it = ordered_body.find("json_schema"); it != ordered_body.end() && !it->is_null()) {
    if (!it->is_string() && !it->is_object() && !it->is_boolean()) {
      reader.Fail(InvalidRequest(WrongType("json_schema", "a JSON schema (object) or its text")));
    } else {
      sampling["json_schema"] = it->is_string() ? it->get<std::string>() : it->dump();
    }
  }
  ApplyResponseFormat(reader, ordered_body, sampling);
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object() ||
        !std::all_of(it->begin(), it->end(), [](const json& bias) { return bias.is_number(); })) {
      reader.Fail(InvalidRequest(WrongType("logit_bias", "an object of token id to bias")));
    } else {
      sampling["logit_bias"] = *it;
    }
  }
  return sampling;
}

}  // namespace

std::optional<int64_t> FieldReader::Int(const json& object, const char* key) {
  auto value = ReadOptionalInt(object, key);
  if (!value.ok()) {
    Fail(InvalidRequest(value.status().message()));
    return std::nullopt;
  }
  return *value;
}

std::optional<double> FieldReader::Number(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (!it->is_number() || it->is_boolean()) {
    Fail(InvalidRequest(WrongType(key, "a number")));
    return std::nullopt;
  }
  return it->get<double>();
}

std::optional<bool> FieldReader::Bool(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) {
    Fail(InvalidRequest(WrongType(key, "a boolean")));
    return std::nullopt;
  }
  return it->get<bool>();
}

std::optional<std::string> FieldReader::String(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) {
    Fail(InvalidRequest(WrongType(key, "a string")));
    return std::nullopt;
  }
  return it->get<std::string>();
}

void FieldReader::Fail(ApiError error) {
  if (!error_) error_ = std::move(error);
}

int64_t ReadN(FieldReader& reader, const ServerContext& ctx, const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return 1;
  auto n = CheckN(*it, ctx.limits, key);
  if (!n.ok()) {
    reader.Fail(InvalidRequest(n.status().message()));
    return 1;
  }
  return *n;
}

OpenAiCommon ReadOpenAiCommon(FieldReader& reader, const ServerContext& ctx, const json& body,
                              const nlohmann::ordered_json& ordered) {
  OpenAiCommon out;
  out.model = reader.String(body, "model").value_or("default");
  out.stream = reader.Bool(body, "stream").value_or(false);
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) {
      reader.Fail(InvalidRequest("stream_options must be an object."));
    } else {
      out.include_usage = reader.Bool(*it, "include_usage").value_or(false);
    }
  }
  out.n = ReadN(reader, ctx, body, "n");
  out.rid = reader.String(body, "rid");
  out.priority = reader.Int(body, "priority");
  out.cache_namespace = reader.String(body, "cache_salt").value_or("") +
                        reader.String(body, "extra_key").value_or("");
  std::optional<std::string> adapter = reader.String(body, "lora_path");
  if (auto from_model = AdapterOfModel(ctx, out.model)) adapter = from_model;
  if (auto lora = ResolveLora(ctx, adapter); lora.ok()) {
    out.lora = *lora;
  } else {
    reader.Fail(InvalidRequest(lora.status().message()));
  }
  out.return_hidden_states = reader.Bool(body, "return_hidden_states").value_or(false);
  if (out.return_hidden_states && !ctx.args->GetBool(args::key::kEnableReturnHiddenStates)) {
    reader.Fail(
        InvalidRequest("The server is not configured to return the hidden states. Please set "
                       "`--enable-return-hidden-states` to enable this feature."));
  }
  out.return_token_ids = reader.Bool(body, "return_token_ids").value_or(false);
  out.return_cached_tokens_details =
      reader.Bool(body, "return_cached_tokens_details").value_or(false);
  if (auto rank = ReadRoutedDpRank(ctx, body); rank.ok()) {
    out.routed_dp_rank = *rank;
  } else {
    reader.Fail(InvalidRequest(rank.status().message()));
  }
  out.sampling = SamplingFromOpenAi(reader, body, ordered);
  return out;
}

std::optional<std::string> AdapterOfModel(const ServerContext& ctx, const std::string& model) {
  // Without LoRA a model name is only echoed back (clients send all kinds), as before.
  if (ctx.lora_registry == nullptr || model == ctx.served_model_name) return std::nullopt;
  const std::string prefix = ctx.served_model_name + ":";
  if (model.rfind(prefix, 0) == 0) return model.substr(prefix.size());
  if (ctx.lora_registry->Find(model)) return model;
  if (const size_t colon = model.find(':'); colon != std::string::npos) {
    return model.substr(colon + 1);
  }
  return std::nullopt;
}

void ApplyResponseFormat(FieldReader& reader, const nlohmann::ordered_json& body, json& sampling) {
  auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return;
  auto type_field = it->is_object() ? it->find("type") : it->end();
  if (!it->is_object() || type_field == it->end() || !type_field->is_string()) {
    reader.Fail(InvalidRequest("response_format must be an object with a string 'type'."));
    return;
  }
  const nlohmann::ordered_json& format = *it;
  const std::string type = type_field->get<std::string>();
  if (type == "text") return;
  if (type == "json_object") {
    sampling["json_schema"] = R"({"type": "object"})";
  } else if (type == "json_schema") {
    // SGLang's pydantic model names the field schema_ (alias "schema"); name and strict are
    // accepted, and the schema is always enforced strictly.
    auto spec = format.find("json_schema");
    if (spec == format.end() || !spec->is_object()) {
      reader.Fail(InvalidRequest("response_format.json_schema must be an object with a 'schema'."));
      return;
    }
    auto schema = spec->find("schema");
    if (schema == spec->end()) schema = spec->find("schema_");
    if (schema == spec->end() || schema->is_null()) {
      reader.Fail(BadRequest("schema_ is required for json_schema response format request."));
      return;
    }
    if (!schema->is_object() && !schema->is_boolean()) {
      reader.Fail(
          InvalidRequest("response_format.json_schema.schema must be a JSON schema object."));
      return;
    }
    sampling["json_schema"] = schema->dump();
  } else if (type == "structural_tag") {
    sampling["structural_tag"] = format.dump();
  } else {
    reader.Fail(BadRequest(fmt::format(
        "response_format type '{}' is not supported; use 'text', 'json_object', 'json_schema' or "
        "'structural_tag'.",
        type)));
  }
}

void SendError(ResponseWriter& writer, const ApiError& error) {
  writer.Send(error.status, "application/json", ToJsonText(error.OpenAiBody()));
}

void SendValidationError(ResponseWriter& writer, const std::string& message) {
  SendError(writer, ApiError{400, message, "Bad Request", {}});
}

std::string FinishReasonName(const ChoiceState& choice) {
  if (!choice.finish) return "stop";
  switch (choice.finish->kind) {
    case engine::FinishKind::kStop:
      return "stop";
    case engine::FinishKind::kLength:
      return "length";
    case engine::FinishKind::kAbort:
      return "abort";
  }
  return "stop";
}

json LastHiddenState(const ChoiceState& choice) {
  if (choice.hidden_states.size() <= static_cast<size_t>(choice.prompt_tokens)) {
    return json::array();
  }
  return choice.hidden_states.back();
}

json MatchedStop(const ChoiceState& choice) {
  if (!choice.finish || choice.finish->kind != engine::FinishKind::kStop) return nullptr;
  if (choice.finish->matched_str) return *choice.finish->matched_str;
  if (choice.finish->matched_token) return *choice.finish->matched_token;
  return nullptr;
}

json Usage(const ServerContext& ctx, const std::vector<ChoiceState>& choices, size_t n) {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i % n == 0) {
      prompt += choices[i].prompt_tokens;
      cached += choices[i].cached_tokens;
    }
    completion += choices[i].completion_tokens;
  }
  json details = nullptr;
  if (ctx.args->GetBool(args::key::kEnableCacheReport) && cached > 0) {
    details = {{"cached_tokens", cached}};
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", details},
          {"reasoning_tokens", 0}};
}

json Envelope(const ServerContext& ctx, const std::string& id, const char* object, int64_t created,
              const std::string& model, json choices, json usage) {
  return {{"id", id},
          {"object", object},
          {"created", created},
          {"model", model},
          {"choices", std::move(choices)},
          {"usage", std::move(usage)},
          {"metadata", {{"weight_version", ctx.weight_version.Get()}}}};
}

json UsageChunk(const std::string& id, const char* object, int64_t created,
                const std::string& model, json usage) {
  return {{"id", id},       {"object", object},         {"created", created},
          {"model", model}, {"choices", json::array()}, {"usage", std::move(usage)}};
}

json SglextChunk(const std::string& id, const char* object, int64_t created,
                 const std::string& model, json sglext) {
  json chunk = UsageChunk(id, object, created, model, nullptr);
  chunk["sglext"] = std::move(sglext);
  return chunk;
}

json CachedTokensDetails(const ChoiceState& choice) {
  if (choice.storage_cached_tokens < 0) return {{"device", choice.cached_tokens}, {"host", 0}};
  return {{"device", choice.cached_tokens - choice.storage_cached_tokens},
          {"host", 0},
          {"storage", choice.storage_cached_tokens},
          {"storage_backend", "HiCacheFile"}};
}

json Bytes(const std::string& text) {
  json out = json::array();
  for (unsigned char c : text) out.push_back(static_cast<int>(c));
  return out;
}

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace radixserve::api::openai

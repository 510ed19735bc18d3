#include "api/openai_common.h"

#include <chrono>

#include <fmt/format.h>

#include "api/json_fields.h"
#include "api/request_builder.h"

namespace radixserve::api::openai {
namespace {

[[noreturn]] void WrongType(const char* key, const char* expected) {
  throw ValidationError(fmt::format("Invalid value for '{}': expected {}.", key, expected));
}

}  // namespace

void SendStreamError(ResponseWriter& writer, const ApiError& error);

std::optional<int64_t> OptInt(const json& body, const char* key) {
  auto value = ReadOptionalInt(body, key);
  if (!value.ok()) throw ValidationError(value.status().message());
  return *value;
}

std::string CacheNamespace(const json& body) {
  return OptString(body, "cache_salt").value_or("") + OptString(body, "extra_key").value_or("");
}

int64_t RequireN(const ServerContext& ctx, const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return 1;
  auto n = CheckN(*it, ctx.limits, key);
  if (!n.ok()) throw ValidationError(n.status().message());
  return *n;
}

std::optional<double> OptNumber(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number() || it->is_boolean()) WrongType(key, "a number");
  return it->get<double>();
}

std::optional<bool> OptBool(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) WrongType(key, "a boolean");
  return it->get<bool>();
}

std::optional<std::string> OptString(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) WrongType(key, "a string");
  return it->get<std::string>();
}

json SamplingFromOpenAi(const json& body, const nlohmann::ordered_json& ordered_body) {
  json sampling = json::object();
  auto copy_number = [&](const char* from, const char* to) {
    if (auto v = OptNumber(body, from)) sampling[to] = body[from];
  };
  copy_number("temperature", "temperature");
  copy_number("top_p", "top_p");
  copy_number("min_p", "min_p");
  copy_number("frequency_penalty", "frequency_penalty");
  copy_number("presence_penalty", "presence_penalty");
  copy_number("repetition_penalty", "repetition_penalty");
  if (auto v = OptInt(body, "top_k")) sampling["top_k"] = *v;
  if (auto v = OptInt(body, "min_tokens")) sampling["min_new_tokens"] = *v;
  if (auto v = OptInt(body, "seed")) sampling["sampling_seed"] = *v;
  if (auto v = OptBool(body, "ignore_eos")) sampling["ignore_eos"] = *v;
  if (auto v = OptBool(body, "skip_special_tokens")) sampling["skip_special_tokens"] = *v;
  if (auto v = OptBool(body, "spaces_between_special_tokens")) {
    sampling["spaces_between_special_tokens"] = *v;
  }
  if (auto v = OptBool(body, "no_stop_trim")) sampling["no_stop_trim"] = *v;
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& stop = body["stop"];
    if (!stop.is_string() && !stop.is_array()) WrongType("stop", "a string or a list of strings");
    if (stop.is_array()) {
      for (const auto& s : stop) {
        if (!s.is_string()) WrongType("stop", "a string or a list of strings");
      }
    }
    sampling["stop"] = stop;
  }
  if (body.contains("stop_token_ids") && !body["stop_token_ids"].is_null()) {
    const json& ids = body["stop_token_ids"];
    if (!ids.is_array()) WrongType("stop_token_ids", "a list of integers");
    for (const auto& id : ids) {
      if (!id.is_number_integer()) WrongType("stop_token_ids", "a list of integers");
    }
    sampling["stop_token_ids"] = ids;
  }
  if (body.contains("stop_regex") && !body["stop_regex"].is_null()) {
    const json& stop = body["stop_regex"];
    if (!stop.is_string() && !stop.is_array()) {
      WrongType("stop_regex", "a string or a list of strings");
    }
    if (stop.is_array()) {
      for (const auto& s : stop) {
        if (!s.is_string()) WrongType("stop_regex", "a string or a list of strings");
      }
    }
    sampling["stop_regex"] = stop;
  }
  // SGLang's extra-body constraints. A schema may come as a JSON object or as its text.
  if (auto v = OptString(body, "regex")) sampling["regex"] = *v;
  if (auto v = OptString(body, "ebnf")) sampling["ebnf"] = *v;
  // Schemas are passed on with the client's key order: it is the order of the output's
  // properties.
  if (ordered_body.contains("json_schema") && !ordered_body["json_schema"].is_null()) {
    const nlohmann::ordered_json& schema = ordered_body["json_schema"];
    if (!schema.is_string() && !schema.is_object() && !schema.is_boolean()) {
      WrongType("json_schema", "a JSON schema (object) or its text");
    }
    sampling["json_schema"] = schema.is_string() ? schema.get<std::string>() : schema.dump();
  }
  ApplyResponseFormat(ordered_body, sampling);
  if (body.contains("logit_bias") && !body["logit_bias"].is_null()) {
    const json& bias = body["logit_bias"];
    if (!bias.is_object()) WrongType("logit_bias", "an object of token id to bias");
    for (const auto& [key, value] : bias.items()) {
      if (!value.is_number()) WrongType("logit_bias", "an object of token id to bias");
    }
    sampling["logit_bias"] = bias;
  }
  return sampling;
}

void ApplyResponseFormat(const nlohmann::ordered_json& body, json& sampling) {
  auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_object()) {
    throw ValidationError("response_format must be an object with a string 'type'.");
  }
  const nlohmann::ordered_json& format = *it;
  auto type_field = format.find("type");
  if (type_field == format.end() || !type_field->is_string()) {
    throw ValidationError("response_format must be an object with a string 'type'.");
  }
  const std::string type = type_field->get<std::string>();
  if (type == "text") return;
  if (type == "json_object") {
    sampling["json_schema"] = R"({"type": "object"})";
  } else if (type == "json_schema") {
    // SGLang's pydantic model names the field schema_ (alias "schema"); name and strict are
    // accepted, and the schema is always enforced strictly.
    auto spec = format.find("json_schema");
    if (spec == format.end() || !spec->is_object()) {
      throw ValidationError("response_format.json_schema must be an object with a 'schema'.");
    }
    auto schema = spec->find("schema");
    if (schema == spec->end()) schema = spec->find("schema_");
    if (schema == spec->end() || schema->is_null()) {
      throw RequestError("schema_ is required for json_schema response format request.");
    }
    if (!schema->is_object() && !schema->is_boolean()) {
      throw ValidationError("response_format.json_schema.schema must be a JSON schema object.");
    }
    sampling["json_schema"] = schema->dump();
  } else if (type == "structural_tag") {
    sampling["structural_tag"] = format.dump();
  } else {
    throw RequestError(fmt::format(
        "response_format type '{}' is not supported; use 'text', 'json_object', 'json_schema' or "
        "'structural_tag'.",
        type));
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
  if (ctx.args->GetBool("enable-cache-report") && cached > 0) {
    details = {{"cached_tokens", cached}};
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", details},
          {"reasoning_tokens", 0}};
}

void SendStreamError(ResponseWriter& writer, const ApiError& error) {
  writer.SendEvent(ToJsonText(json{{"error", error.OpenAiBody()}}));
  writer.SendEvent("[DONE]");
  writer.EndStream();
}

bool AnswerFailedChoice(CallTracker& call, bool stream) {
  for (const ChoiceState& choice : call.choices()) {
    if (!choice.finish || choice.finish->kind != engine::FinishKind::kAbort ||
        choice.finish->status_code < 400) {
      continue;
    }
    const int status = choice.finish->status_code;
    ApiError error{status, choice.finish->message, status == 503 ? "503" : "BadRequestError", {}};
    if (stream) {
      SendStreamError(call.writer(), error);
    } else {
      SendError(call.writer(), error);
    }
    return true;
  }
  return false;
}

CallTracker::OnRejected RejectionAnswer(ResponseWriterPtr writer) {
  return [writer](const ApiError& error, bool stream_started) {
    if (stream_started) {
      SendStreamError(*writer, error);
    } else {
      SendError(*writer, error);
    }
  };
}

json UsageChunk(const std::string& id, const char* object, int64_t created,
                const std::string& model, json usage) {
  return {{"id", id},       {"object", object},         {"created", created},
          {"model", model}, {"choices", json::array()}, {"usage", std::move(usage)}};
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

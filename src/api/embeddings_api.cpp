#include "api/embeddings_api.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "api/api_error.h"
#include "api/json_body.h"
#include "api/json_fields.h"
#include "api/score_api.h"
#include "common/base64.h"

namespace radixserve::api {
namespace {

using nlohmann::json;

// Results of one call's inputs, answered when the last arrives.
struct EmbedCall {
  std::mutex mu;
  std::vector<std::optional<engine::EmbedResult>> results;
  size_t pending = 0;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

void SendApiError(ResponseWriter& writer, const ApiError& error, bool native) {
  writer.Send(error.status, "application/json",
              ToJsonText(native ? error.NativeBody() : error.OpenAiBody()));
}

bool IsIdList(const json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const json& e : v) {
    if (!e.is_number_integer()) return false;
  }
  return true;
}

Expected<std::vector<int32_t>> ReadIds(const json& v, const ServerContext& ctx) {
  std::vector<int32_t> ids;
  for (const json& e : v) {
    const int64_t id = e.get<int64_t>();
    if (id < 0 || id >= ctx.model.vocab_size) {
      return InvalidArgument("Token id " + std::to_string(id) + " is out of the vocabulary [0, " +
                             std::to_string(ctx.model.vocab_size) + ").");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

Expected<EmbedInput> FromText(const ServerContext& ctx, const std::string& text) {
  if (ctx.tokenizer == nullptr) {
    return InvalidArgument(
        "Text input needs the tokenizer, which --skip-tokenizer-init turned "
        "off; send token ids instead.");
  }
  return EmbedInput{
      .ids = ctx.tokenizer->Encode(text, {}), .token_type_ids = {}, .from_text = true};
}

// input / text / input_ids: a string, a list of strings, a list of ids, a list of id lists.
// `field` names it in errors.
Expected<std::vector<EmbedInput>> ReadInputs(const ServerContext& ctx, const json& v,
                                             const std::string& field, bool* single) {
  std::vector<EmbedInput> inputs;
  *single = true;
  if (v.is_string()) {
    RADIX_ASSIGN_OR_RETURN(inputs.emplace_back(), FromText(ctx, v.get<std::string>()));
    return inputs;
  }
  if (IsIdList(v)) {
    EmbedInput in;
    RADIX_ASSIGN_OR_RETURN(in.ids, ReadIds(v, ctx));
    inputs.push_back(std::move(in));
    return inputs;
  }
  const std::string shapes =
      "'" + field +
      "' must be a string, a list of strings, a list of token ids or a list of "
      "token-id lists (non-empty)";
  if (!v.is_array() || v.empty()) return InvalidArgument(shapes);
  *single = false;
  for (const json& item : v) {
    if (item.is_string()) {
      RADIX_ASSIGN_OR_RETURN(inputs.emplace_back(), FromText(ctx, item.get<std::string>()));
    } else if (IsIdList(item)) {
      EmbedInput in;
      RADIX_ASSIGN_OR_RETURN(in.ids, ReadIds(item, ctx));
      inputs.push_back(std::move(in));
    } else {
      return InvalidArgument(shapes);
    }
  }
  return inputs;
}

}  // namespace

Status FitContext(const ServerContext& ctx, std::vector<EmbedInput>& inputs) {
  const auto limit = static_cast<size_t>(ctx.model.context_len);
  const bool truncate = ctx.args != nullptr && ctx.args->GetBool(args::key::kAllowAutoTruncate);
  for (EmbedInput& in : inputs) {
    if (in.ids.empty()) return InvalidArgument("An input has no tokens.");
    if (in.ids.size() <= limit) continue;
    if (!truncate) {
      return InvalidArgument("The input (" + std::to_string(in.ids.size()) +
                             " tokens) is longer than the model's context length (" +
                             std::to_string(limit) +
                             " tokens). Shorten it, or start the server with "
                             "--allow-auto-truncate.");
    }
    const int32_t last = in.ids.back();
    in.ids.resize(limit);
    if (in.from_text) in.ids.back() = last;
    if (!in.token_type_ids.empty()) {
      const int32_t last_type = in.token_type_ids.back();
      in.token_type_ids.resize(limit);
      if (in.from_text) in.token_type_ids.back() = last_type;
    }
  }
  return Status::Ok();
}

void RunEmbedCall(ServerContext& ctx, const std::string& base, std::vector<EmbedInput> inputs,
                  ResponseWriterPtr writer, bool native,
                  std::function<void(std::vector<engine::EmbedResult>&, double)> answer) {
  auto call = std::make_shared<EmbedCall>();
  call->results.resize(inputs.size());
  call->pending = inputs.size();
  std::vector<std::string> rids;
  for (size_t i = 0; i < inputs.size(); ++i) rids.push_back(base + "-" + std::to_string(i));
  engine::Engine* engine = ctx.engine;
  writer->OnDisconnect([engine, rids] {
    for (const std::string& rid : rids) engine->Abort(rid, engine::AbortMatch::kExactRid);
  });
  for (size_t i = 0; i < inputs.size(); ++i) {
    engine::EmbedRequest request;
    request.rid = rids[i];
    request.input_ids = std::move(inputs[i].ids);
    request.token_type_ids = std::move(inputs[i].token_type_ids);
    auto sink = [call, i, writer, native, answer](engine::EmbedResult result) {
      bool last = false;
      {
        std::lock_guard lock(call->mu);
        call->results[i] = std::move(result);
        last = --call->pending == 0;
      }
      if (!last) return;
      writer->Post([call, writer, native, answer] {
        std::vector<engine::EmbedResult> results;
        for (auto& r : call->results) {
          if (!r->status.ok()) {
            SendApiError(*writer, FromStatus(r->status), native);
            return;
          }
          results.push_back(std::move(*r));
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - call->start).count();
        answer(results, seconds);
      });
    };
    if (Status s = engine->SubmitEmbed(std::move(request), sink); !s.ok()) {
      // Inputs already queued are aborted; their (ignored) results complete the call.
      for (size_t j = 0; j < i; ++j) engine->Abort(rids[j], engine::AbortMatch::kExactRid);
      std::lock_guard lock(call->mu);
      call->pending = 0;  // nobody answers but us
      SendApiError(*writer, FromStatus(s), native);
      return;
    }
  }
}

namespace {

// The body as a JSON object whose keys are all in `fields` (a 400 naming the first other key).
ApiExpected<json> ReadBody(const std::string& body,
                           std::initializer_list<std::string_view> fields) {
  auto parsed = ParseJsonBody(body);
  if (!parsed.ok()) return FromStatus(parsed.status());
  if (!parsed->is_object()) return BadRequest("The body must be a JSON object.");
  for (auto it = parsed->begin(); it != parsed->end(); ++it) {
    if (std::find(fields.begin(), fields.end(), it.key()) == fields.end()) {
      std::string names;
      for (std::string_view f : fields) names += (names.empty() ? "" : ", ") + std::string(f);
      return BadRequest("Unsupported field '" + it.key() + "' (supported: " + names + ").");
    }
  }
  return std::move(parsed).value();
}

// SGLang's Matryoshka checks (its messages) plus the embedding's own width.
Status CheckDimensions(const ServerContext& ctx, int64_t dims) {
  if (!ctx.model.is_matryoshka) {
    return InvalidArgument("Model '" + ctx.served_model_name +
                           "' does not support matryoshka representation, changing output "
                           "dimensions will lead to poor results.");
  }
  if (dims < 1) return InvalidArgument("Requested dimensions must be greater than 0");
  const auto& allowed = ctx.model.matryoshka_dimensions;
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), dims) == allowed.end()) {
    std::string list;
    for (int64_t d : allowed) list += (list.empty() ? "" : ", ") + std::to_string(d);
    return InvalidArgument("Model '" + ctx.served_model_name + "' only supports [" + list +
                           "] matryoshka dimensions, using other output dimensions will lead to "
                           "poor results.");
  }
  if (ctx.model.embedding_dim > 0 && dims > ctx.model.embedding_dim) {
    return InvalidArgument("Requested dimensions (" + std::to_string(dims) +
                           ") exceed the embedding's " + std::to_string(ctx.model.embedding_dim) +
                           ".");
  }
  return Status::Ok();
}

// Matryoshka truncation: the first `dims` values, renormalized when the model normalizes (what
// slicing before the model's Normalize gives).
void Truncate(std::vector<float>& v, int64_t dims, bool normalized) {
  v.resize(static_cast<size_t>(std::min<int64_t>(dims, static_cast<int64_t>(v.size()))));
  if (!normalized) return;
  double norm2 = 0;
  for (float x : v) norm2 += static_cast<double>(x) * x;
  const double scale = 1.0 / std::max(std::sqrt(norm2), 1e-12);
  for (float& x : v) x = static_cast<float>(x * scale);
}

std::string Base64(const std::vector<float>& values) {
  // The floats' bytes as they are in memory: little-endian on x86-64, as OpenAI's clients expect.
  return Base64Encode(std::string_view(reinterpret_cast<const char*>(values.data()),
                                       values.size() * sizeof(float)));
}

}  // namespace

ApiError WrongServerKind(bool generation_route) {
  return BadRequest(generation_route
                        ? "This server serves an embedding model (--is-embedding): generation "
                          "routes are not available; use /v1/embeddings or /encode."
                        : "This server serves a generation model: embedding routes need an "
                          "embedding model served with --is-embedding.");
}

void HandleEmbeddings(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer) {
  if (ctx.model.is_generation) return SendApiError(*writer, WrongServerKind(false), false);
  auto parsed = ReadBody(body, {"input", "model", "encoding_format", "dimensions"});
  if (!parsed.ok()) return SendApiError(*writer, parsed.status(), false);
  const json& req = *parsed;
  if (!req.contains("input"))
    return SendApiError(*writer, BadRequest("'input' is required."), false);
  std::string format = "float";
  if (req.contains("encoding_format") && !req["encoding_format"].is_null()) {
    if (!req["encoding_format"].is_string() ||
        (req["encoding_format"] != "float" && req["encoding_format"] != "base64")) {
      return SendApiError(*writer, BadRequest("'encoding_format' must be 'float' or 'base64'."),
                          false);
    }
    format = req["encoding_format"].get<std::string>();
  }
  std::optional<int64_t> dimensions;
  if (req.contains("dimensions") && !req["dimensions"].is_null()) {
    auto dims = ReadInt(req["dimensions"], "dimensions");
    if (!dims.ok()) return SendApiError(*writer, InvalidRequest(dims.status().message()), false);
    if (Status s = CheckDimensions(ctx, *dims); !s.ok()) {
      return SendApiError(*writer, FromStatus(s), false);
    }
    dimensions = *dims;
  }
  bool single = false;
  auto inputs = ReadInputs(ctx, req["input"], "input", &single);
  if (!inputs.ok()) return SendApiError(*writer, FromStatus(inputs.status()), false);
  if (Status s = FitContext(ctx, *inputs); !s.ok()) {
    return SendApiError(*writer, FromStatus(s), false);
  }
  const std::string model = ctx.served_model_name;
  const std::string base = "embd-" + std::to_string(ctx.next_rid.fetch_add(1));
  RunEmbedCall(ctx, base, std::move(inputs).value(), writer, false,
               [writer, format, model, dimensions, normalized = ctx.model.normalized_embeddings](
                   std::vector<engine::EmbedResult>& results, double) {
                 json data = json::array();
                 int64_t tokens = 0;
                 for (size_t i = 0; i < results.size(); ++i) {
                   if (dimensions) Truncate(results[i].embedding, *dimensions, normalized);
                   json item{{"object", "embedding"}, {"index", i}};
                   if (format == "base64") {
                     item["embedding"] = Base64(results[i].embedding);
                   } else {
                     item["embedding"] = results[i].embedding;
                   }
                   data.push_back(std::move(item));
                   tokens += results[i].prompt_tokens;
                 }
                 json out{{"object", "list"},
                          {"data", std::move(data)},
                          {"model", model},
                          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
                 writer->Send(200, "application/json", ToJsonText(out));
               });
}

void HandleClassify(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer) {
  HandleEncode(ctx, body, std::move(writer));
}

void HandleV1Classify(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer) {
  if (ctx.model.is_generation) return SendApiError(*writer, WrongServerKind(false), false);
  if (ctx.model.labels.empty()) {
    return SendApiError(*writer,
                        BadRequest("/v1/classify needs a classification model "
                                   "(*ForSequenceClassification); " +
                                   ctx.served_model_name + " is an embedding model."),
                        false);
  }
  auto parsed = ReadBody(body, {"input", "model"});
  if (!parsed.ok()) return SendApiError(*writer, parsed.status(), false);
  const json& req = *parsed;
  if (!req.contains("input") || req["input"].is_null() ||
      (req["input"].is_array() && req["input"].empty())) {
    return SendApiError(*writer, BadRequest("Input cannot be empty"), false);
  }
  const json& input = req["input"];
  if (input.is_string() &&
      input.get<std::string>().find_first_not_of(" \t\r\n") == std::string::npos) {
    return SendApiError(*writer, BadRequest("Input cannot be empty or whitespace only"), false);
  }
  if (input.is_array() && input[0].is_string()) {
    for (size_t i = 0; i < input.size(); ++i) {
      if (!input[i].is_string()) {
        return SendApiError(*writer, BadRequest("All items in input list must be strings"), false);
      }
      if (input[i].get<std::string>().find_first_not_of(" \t\r\n") == std::string::npos) {
        return SendApiError(*writer,
                            BadRequest("Input at index " + std::to_string(i) +
                                       " cannot be empty or whitespace only"),
                            false);
      }
    }
  }
  bool single = false;
  auto inputs = ReadInputs(ctx, input, "input", &single);
  if (!inputs.ok()) return SendApiError(*writer, FromStatus(inputs.status()), false);
  if (Status s = FitContext(ctx, *inputs); !s.ok()) {
    return SendApiError(*writer, FromStatus(s), false);
  }
  const std::string base = "classify-" + std::to_string(ctx.next_rid.fetch_add(1));
  const std::string model = ctx.served_model_name;
  const std::vector<std::string> labels = ctx.model.labels;
  RunEmbedCall(ctx, base, std::move(inputs).value(), writer, false,
               [writer, base, model, labels](std::vector<engine::EmbedResult>& results, double) {
                 json data = json::array();
                 int64_t tokens = 0;
                 for (size_t i = 0; i < results.size(); ++i) {
                   const std::vector<float>& logits = results[i].embedding;
                   const std::vector<double> probs = Softmax(logits);
                   const size_t best = static_cast<size_t>(
                       std::max_element(logits.begin(), logits.end()) - logits.begin());
                   data.push_back({{"index", i},
                                   {"label", labels[best]},
                                   {"probs", probs},
                                   {"num_classes", probs.size()}});
                   tokens += results[i].prompt_tokens;
                 }
                 const auto created = std::chrono::duration_cast<std::chrono::seconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count();
                 json out{{"id", base},
                          {"object", "list"},
                          {"created", created},
                          {"model", model},
                          {"data", std::move(data)},
                          {"usage",
                           {{"prompt_tokens", tokens},
                            {"total_tokens", tokens},
                            {"completion_tokens", 0},
                            {"prompt_tokens_details", nullptr}}}};
                 writer->Send(200, "application/json", ToJsonText(out));
               });
}

void HandleGetScore(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer) {
  auto fail = [&writer](const ApiError& error) {
    writer->Send(error.status, "application/json",
                 ToJsonText(ErrorBody(ErrorStyle::kLightLlm, error)));
  };
  if (ctx.model.labels.size() != 1) {
    return fail(BadRequest("/get_score needs a reward model served with --use_reward_model."));
  }
  auto parsed = ReadBody(body, {"chat", "parameters"});
  if (!parsed.ok()) return fail(parsed.status());
  const json& req = *parsed;
  if (!req.contains("chat") || !req["chat"].is_string()) {
    return fail(BadRequest("'chat' (the conversation text to score) must be a string."));
  }
  if (req.contains("parameters") && !req["parameters"].is_object()) {
    return fail(BadRequest("'parameters' must be an object."));
  }
  bool single = false;
  auto inputs = ReadInputs(ctx, req["chat"], "chat", &single);
  if (!inputs.ok()) return fail(FromStatus(inputs.status()));
  if (Status s = FitContext(ctx, *inputs); !s.ok()) return fail(FromStatus(s));
  const std::string base = "score-" + std::to_string(ctx.next_rid.fetch_add(1));
  RunEmbedCall(ctx, base, std::move(inputs).value(), writer, false,
               [writer](std::vector<engine::EmbedResult>& results, double) {
                 json out{{"score", results[0].embedding[0]},
                          {"prompt_tokens", results[0].prompt_tokens},
                          {"finish_reason", "length"}};
                 writer->Send(200, "application/json", ToJsonText(out));
               });
}

void HandleEncode(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer) {
  if (ctx.model.is_generation) return SendApiError(*writer, WrongServerKind(false), true);
  auto parsed = ReadBody(body, {"text", "input_ids"});
  if (!parsed.ok()) return SendApiError(*writer, parsed.status(), true);
  const json& req = *parsed;
  const bool has_text = req.contains("text") && !req["text"].is_null();
  const bool has_ids = req.contains("input_ids") && !req["input_ids"].is_null();
  if (has_text == has_ids) {
    return SendApiError(*writer, BadRequest("Give exactly one of 'text' and 'input_ids'."), true);
  }
  bool single = false;
  auto inputs = has_text ? ReadInputs(ctx, req["text"], "text", &single)
                         : ReadInputs(ctx, req["input_ids"], "input_ids", &single);
  if (inputs.ok() && has_text && !req["text"].is_string() && !single) {
    for (const EmbedInput& in : *inputs) {
      if (!in.from_text) {
        return SendApiError(*writer, BadRequest("'text' must be a string or a list of strings."),
                            true);
      }
    }
  }
  if (inputs.ok() && has_ids &&
      (req["input_ids"].is_string() || (!single && !req["input_ids"][0].is_array()))) {
    return SendApiError(*writer, BadRequest("'input_ids' must be token ids or lists of them."),
                        true);
  }
  if (!inputs.ok()) return SendApiError(*writer, FromStatus(inputs.status()), true);
  if (Status s = FitContext(ctx, *inputs); !s.ok()) {
    return SendApiError(*writer, FromStatus(s), true);
  }
  const std::string base = "encode-" + std::to_string(ctx.next_rid.fetch_add(1));
  RunEmbedCall(ctx, base, std::move(inputs).value(), writer, true,
               [writer, single, base](std::vector<engine::EmbedResult>& results, double seconds) {
                 json out = json::array();
                 for (size_t i = 0; i < results.size(); ++i) {
                   out.push_back({{"embedding", results[i].embedding},
                                  {"meta_info",
                                   {{"id", base + "-" + std::to_string(i)},
                                    {"prompt_tokens", results[i].prompt_tokens},
                                    {"e2e_latency", seconds}}}});
                 }
                 writer->Send(200, "application/json", ToJsonText(single ? out[0] : out));
               });
}

}  // namespace radixserve::api

#include "api/embeddings_api.h"

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "api/api_error.h"
#include "api/json_body.h"

namespace radixserve::api {
namespace {

using nlohmann::json;

// One input: its ids and whether it came from text (text truncation keeps the final token).
struct EmbedInput {
  std::vector<int32_t> ids;
  bool from_text = false;
};

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
    return InvalidArgument("Text input needs the tokenizer, which --skip-tokenizer-init turned "
                           "off; send token ids instead.");
  }
  return EmbedInput{ctx.tokenizer->Encode(text, {}), true};
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
      "'" + field + "' must be a string, a list of strings, a list of token ids or a list of "
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

// Over-long inputs: 400, or cut to the context length with --allow-auto-truncate.
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
  }
  return Status::Ok();
}

// Submits every input; `answer` runs (on an HTTP thread, through writer->Post) with all results.
// Input i gets rid `base`-i.
void Run(ServerContext& ctx, const std::string& base, std::vector<EmbedInput> inputs,
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

std::string Base64(const std::vector<float>& values) {
  static const char kTable[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());  // little-endian on x86-64
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t chunk = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) chunk |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) chunk |= static_cast<uint8_t>(bytes[i + 2]);
    out += kTable[(chunk >> 18) & 63];
    out += kTable[(chunk >> 12) & 63];
    out += i + 1 < bytes.size() ? kTable[(chunk >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kTable[chunk & 63] : '=';
  }
  return out;
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
  auto parsed = ParseJsonBody(body);
  if (!parsed.ok()) return SendApiError(*writer, FromStatus(parsed.status()), false);
  const json& req = *parsed;
  if (!req.is_object()) return SendApiError(*writer, BadRequest("The body must be a JSON object."), false);
  for (auto it = req.begin(); it != req.end(); ++it) {
    const std::string& key = it.key();
    if (key != "input" && key != "model" && key != "encoding_format" && key != "dimensions") {
      return SendApiError(*writer,
                          BadRequest("Unsupported field '" + key +
                                     "' (supported: input, model, encoding_format, dimensions)."),
                          false);
    }
  }
  if (!req.contains("input")) return SendApiError(*writer, BadRequest("'input' is required."), false);
  std::string format = "float";
  if (req.contains("encoding_format") && !req["encoding_format"].is_null()) {
    if (!req["encoding_format"].is_string() ||
        (req["encoding_format"] != "float" && req["encoding_format"] != "base64")) {
      return SendApiError(*writer, BadRequest("'encoding_format' must be 'float' or 'base64'."),
                          false);
    }
    format = req["encoding_format"].get<std::string>();
  }
  if (req.contains("dimensions") && !req["dimensions"].is_null()) {
    return SendApiError(*writer,
                        BadRequest("'dimensions' is not supported: the model " +
                                   ctx.served_model_name +
                                   " does not declare Matryoshka embeddings, so its vectors "
                                   "cannot be truncated."),
                        false);
  }
  bool single = false;
  auto inputs = ReadInputs(ctx, req["input"], "input", &single);
  if (!inputs.ok()) return SendApiError(*writer, FromStatus(inputs.status()), false);
  if (Status s = FitContext(ctx, *inputs); !s.ok()) {
    return SendApiError(*writer, FromStatus(s), false);
  }
  const std::string model = ctx.served_model_name;
  const std::string base = "embd-" + std::to_string(ctx.next_rid.fetch_add(1));
  Run(ctx, base, std::move(inputs).value(), writer, false,
      [writer, format, model](std::vector<engine::EmbedResult>& results, double) {
        json data = json::array();
        int64_t tokens = 0;
        for (size_t i = 0; i < results.size(); ++i) {
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

void HandleEncode(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer) {
  if (ctx.model.is_generation) return SendApiError(*writer, WrongServerKind(false), true);
  auto parsed = ParseJsonBody(body);
  if (!parsed.ok()) return SendApiError(*writer, FromStatus(parsed.status()), true);
  const json& req = *parsed;
  if (!req.is_object()) return SendApiError(*writer, BadRequest("The body must be a JSON object."), true);
  for (auto it = req.begin(); it != req.end(); ++it) {
    const std::string& key = it.key();
    if (key != "text" && key != "input_ids") {
      return SendApiError(
          *writer, BadRequest("Unsupported field '" + key + "' (supported: text, input_ids)."),
          true);
    }
  }
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
  if (inputs.ok() && has_ids && (req["input_ids"].is_string() ||
                                 (!single && !req["input_ids"][0].is_array()))) {
    return SendApiError(*writer, BadRequest("'input_ids' must be token ids or lists of them."),
                        true);
  }
  if (!inputs.ok()) return SendApiError(*writer, FromStatus(inputs.status()), true);
  if (Status s = FitContext(ctx, *inputs); !s.ok()) {
    return SendApiError(*writer, FromStatus(s), true);
  }
  const std::string base = "encode-" + std::to_string(ctx.next_rid.fetch_add(1));
  Run(ctx, base, std::move(inputs).value(), writer, true,
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

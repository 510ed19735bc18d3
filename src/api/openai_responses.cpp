#include "api/openai_responses.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "api/background_streams.h"
#include "api/chat_output.h"
#include "api/json_body.h"
#include "api/openai_api.h"
#include "api/openai_common.h"
#include "api/request_builder.h"
#include "api/response_store.h"

namespace radixserve::api {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// SGLang's sampling extras, read by the chat parse as they are on /v1/chat/completions.
constexpr std::array kChatExtras = {"top_k",
                                    "min_p",
                                    "repetition_penalty",
                                    "frequency_penalty",
                                    "presence_penalty",
                                    "stop",
                                    "seed",
                                    "sampling_seed",
                                    "ignore_eos",
                                    "min_tokens",
                                    "stop_token_ids",
                                    "no_stop_trim",
                                    "skip_special_tokens",
                                    "spaces_between_special_tokens",
                                    "logit_bias",
                                    "priority",
                                    "cache_salt",
                                    "extra_key",
                                    "regex",
                                    "ebnf",
                                    "stop_regex",
                                    "separate_reasoning"};

// Fields OpenAI defines that have no effect possible here: a clear 400 instead of silence.
constexpr std::array kUnsupported = {
    std::pair{"conversation",
              "the Conversations API is not served; chain turns with "
              "previous_response_id"},
    std::pair{"prompt", "stored prompt templates are not served; send input and instructions"},
    std::pair{"context_management", "server-side context compaction is not supported"},
    std::pair{"background_options", "background responses are not supported"},
    std::pair{"access_programs", "access programs are not supported"},
    std::pair{"image", "image generation is not supported"},
    std::pair{"moderation", "moderation is not supported"},
    std::pair{"prompt_cache_options",
              "prompt cache options are not supported (the radix cache "
              "keeps every prefix it can)"}};

bool IsNullOr(const ordered_json& body, const char* key) {
  return !body.contains(key) || body[key].is_null();
}

ApiError FieldError(const std::string& field, const std::string& why) {
  ApiError error = InvalidRequest(fmt::format("Invalid value for '{}': {}", field, why));
  error.param = field;
  return error;
}

// The text of a message's content: a string, or the text of its input_text / output_text parts.
ApiExpected<std::string> ContentText(const ordered_json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return std::string();
  if (!content.is_array()) return FieldError(where, "content must be a string or a list of parts.");
  std::string text;
  for (const auto& part : content) {
    const std::string type = part.is_object() && part.contains("type") && part["type"].is_string()
                                 ? part["type"].get<std::string>()
                                 : "";
    if (type != "input_text" && type != "output_text" && type != "text") {
      return FieldError(where, fmt::format("content parts of type '{}' are not supported: this "
                                           "model takes text only.",
                                           type.empty() ? "(none)" : type));
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      return FieldError(where, "a text part needs a string 'text'.");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

std::string StringOr(const ordered_json& object, const char* key, std::string fallback = {}) {
  return object.contains(key) && object[key].is_string() ? object[key].get<std::string>()
                                                         : std::move(fallback);
}

// Appends the request's input to `messages` (chat form) and to `items` (Responses form, as
// GET /v1/responses/{id} shows them); the error when an item cannot be.
std::optional<ApiError> AppendInput(const ordered_json& input, const std::string& id,
                                    ordered_json& messages, json& items) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
    items.push_back(
        {{"type", "message"},
         {"id", fmt::format("msg_{}_in0", id)},
         {"role", "user"},
         {"content", json::array({{{"type", "input_text"}, {"text", input.get<std::string>()}}})}});
    return std::nullopt;
  }
  if (!input.is_array()) return FieldError("input", "must be a string or a list of items.");
  for (size_t i = 0; i < input.size(); ++i) {
    const ordered_json& item = input[i];
    const std::string where = fmt::format("input[{}]", i);
    if (!item.is_object()) return FieldError(where, "each input item must be an object.");
    std::string type = StringOr(item, "type", item.contains("role") ? "message" : "");
    json shown = item;
    if (!shown.contains("id")) shown["id"] = fmt::format("{}_{}_in{}", type, id, i);
    if (type == "message") {
      std::string role = StringOr(item, "role");
      if (role != "user" && role != "system" && role != "developer" && role != "assistant") {
        return FieldError(where, fmt::format("unknown message role '{}'.", role));
      }
      std::string text;
      RADIX_ASSIGN_OR_RETURN(
          text, ContentText(item.contains("content") ? item["content"] : ordered_json(),
                            where + ".content"));
      // Chat templates know system turns; OpenAI's developer turns are their successor.
      messages.push_back({{"role", role == "developer" ? "system" : role}, {"content", text}});
      // Listed (input_items) as OpenAI lists messages: typed, with content parts.
      shown["type"] = "message";
      if (shown["content"].is_string()) {
        shown["content"] = json::array(
            {{{"type", role == "assistant" ? "output_text" : "input_text"}, {"text", text}}});
      }
    } else if (type == "function_call") {
      if (!item.contains("name") || !item["name"].is_string() || !item.contains("arguments") ||
          !item["arguments"].is_string() || !item.contains("call_id") ||
          !item["call_id"].is_string()) {
        return FieldError(where, "a function_call item needs string call_id, name and arguments.");
      }
      ordered_json call = {
          {"id", item["call_id"]},
          {"type", "function"},
          {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
      // Calls right after an assistant turn (or after other calls) belong to that turn.
      if (!messages.empty() && messages.back()["role"] == "assistant") {
        ordered_json& turn = messages.back();
        if (!turn.contains("tool_calls")) turn["tool_calls"] = ordered_json::array();
        turn["tool_calls"].push_back(std::move(call));
      } else {
        messages.push_back({{"role", "assistant"},
                            {"content", ""},
                            {"tool_calls", ordered_json::array({std::move(call)})}});
      }
    } else if (type == "function_call_output") {
      if (!item.contains("call_id") || !item["call_id"].is_string()) {
        return FieldError(where, "a function_call_output item needs a string call_id.");
      }
      std::string output;
      RADIX_ASSIGN_OR_RETURN(output,
                             ContentText(item.contains("output") ? item["output"] : ordered_json(),
                                         where + ".output"));
      messages.push_back(
          {{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", std::move(output)}});
    } else if (type == "reasoning") {
      // Earlier thinking is not shown to the model again (as the reasoning models' own chat
      // templates drop it from history).
    } else {
      return FieldError(where, fmt::format("input items of type '{}' are not supported: "
                                           "messages, function_call, function_call_output and "
                                           "reasoning are.",
                                           type.empty() ? "(none)" : type));
    }
    items.push_back(std::move(shown));
  }
  return std::nullopt;
}

// Responses function tools -> chat tools.
ApiExpected<ordered_json> ChatTools(const ordered_json& tools) {
  if (!tools.is_array()) return FieldError("tools", "must be a list.");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& tool = tools[i];
    const std::string type = tool.is_object() ? StringOr(tool, "type") : "";
    if (type != "function") {
      return FieldError(fmt::format("tools[{}]", i),
                        fmt::format("tools of type '{}' are not supported: only function tools "
                                    "run here (the client executes them).",
                                    type.empty() ? "(none)" : type));
    }
    if (!tool.contains("name") || !tool["name"].is_string()) {
      return FieldError(fmt::format("tools[{}]", i), "a function tool needs a string 'name'.");
    }
    ordered_json function = {{"name", tool["name"]}};
    for (const char* key : {"description", "parameters", "strict"}) {
      if (tool.contains(key) && !tool[key].is_null()) function[key] = tool[key];
    }
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

ApiExpected<ordered_json> ChatToolChoice(const ordered_json& choice) {
  if (choice.is_string()) return choice;
  if (choice.is_object() && StringOr(choice, "type") == "function" && choice.contains("name") &&
      choice["name"].is_string()) {
    return ordered_json{{"type", "function"}, {"function", {{"name", choice["name"]}}}};
  }
  return FieldError("tool_choice",
                    "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                    "\"name\": ...}.");
}

// text.format -> the chat route's response_format.
ApiExpected<std::optional<ordered_json>> ChatResponseFormat(const ordered_json& text) {
  if (!text.is_object()) return FieldError("text", "must be an object.");
  for (const auto& [key, value] : text.items()) {
    if (key == "verbosity") {
      if (!value.is_null() && value != "medium") {
        return FieldError("text.verbosity", "only \"medium\" (the model's own length) is served.");
      }
    } else if (key != "format") {
      return FieldError("text", fmt::format("unknown field '{}'.", key));
    }
  }
  if (IsNullOr(text, "format")) return std::optional<ordered_json>();
  const ordered_json& format = text["format"];
  const std::string type = format.is_object() ? StringOr(format, "type") : "";
  if (type == "text") return std::optional<ordered_json>();
  if (type == "json_object")
    return std::optional<ordered_json>(ordered_json{{"type", "json_object"}});
  if (type == "json_schema") {
    if (!format.contains("schema") || !format["schema"].is_object()) {
      return FieldError("text.format.schema", "a json_schema format needs a 'schema' object.");
    }
    ordered_json schema = {{"name", StringOr(format, "name", "response")},
                           {"schema", format["schema"]}};
    if (format.contains("strict") && format["strict"].is_boolean()) {
      schema["strict"] = format["strict"];
    }
    return std::optional<ordered_json>(
        ordered_json{{"type", "json_schema"}, {"json_schema", schema}});
  }
  return FieldError("text.format.type", "must be \"text\", \"json_object\" or \"json_schema\".");
}

// What a Response object repeats of its request, and what the formatter needs besides.
struct ResponsesOptions {
  std::string id;
  int64_t created = 0;
  std::string model;
  json echo = json::object();
  bool logprobs = false;
  std::optional<int64_t> max_tool_calls;
  bool store = true;
  bool background = false;  // answered at once as "queued"; the result is polled with GET
  ordered_json history = ordered_json::array();  // stored conversation, before this output
  json input_items = json::array();
};

json ResponseUsage(const ServerContext& ctx, const ChoiceState& choice,
                   const std::string& reasoning) {
  int64_t reasoning_tokens = 0;
  if (!reasoning.empty() && ctx.tokenizer != nullptr) {
    reasoning_tokens = static_cast<int64_t>(ctx.tokenizer->Encode(reasoning).size());
  }
  return {{"input_tokens", choice.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", choice.cached_tokens}}},
          {"output_tokens", choice.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
          {"total_tokens", choice.prompt_tokens + choice.completion_tokens}};
}

// A string field of a JSON object; "" when it is missing or not a string.
std::string StringOf(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

json MessageItem(const std::string& id, const char* status, const std::string& text, json lp) {
  return {{"type", "message"},
          {"id", id},
          {"status", status},
          {"role", "assistant"},
          {"content", json::array({{{"type", "output_text"},
                                    {"text", text},
                                    {"annotations", json::array()},
                                    {"logprobs", std::move(lp)}}})}};
}

json ReasoningItem(const std::string& id, const char* status, const std::string& text) {
  return {{"type", "reasoning"},
          {"id", id},
          {"status", status},
          {"summary", json::array()},
          {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}

json CallItem(const std::string& id, const char* status, const std::string& call_id,
              const std::string& name, const std::string& arguments) {
  return {{"type", "function_call"}, {"id", id},     {"status", status},
          {"call_id", call_id},      {"name", name}, {"arguments", arguments}};
}

// The chat assistant turn an output amounts to, for previous_response_id.
ordered_json AssistantTurn(const json& output) {
  std::string content;
  ordered_json calls = ordered_json::array();
  for (const json& item : output) {
    if (item["type"] == "message") {
      for (const json& part : item["content"]) content += part["text"].get<std::string>();
    } else if (item["type"] == "function_call") {
      calls.push_back({{"id", item["call_id"]},
                       {"type", "function"},
                       {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
    }
  }
  ordered_json turn = {{"role", "assistant"}, {"content", std::move(content)}};
  if (!calls.empty()) turn["tool_calls"] = std::move(calls);
  return turn;
}

class ResponsesFormatter final : public ResponseFormatter {
 public:
  ResponsesFormatter(ResponsesOptions options, std::unique_ptr<ChatOutput> output,
                     ResponseStore* store)
      : o_(std::move(options)), output_(std::move(output)), store_(store) {}

  void StreamEvent(const ServerContext& ctx, const std::vector<ChoiceState>& choices, size_t index,
                   const engine::RequestEvent& event, const Emit& emit) override {
    const ChoiceState& choice = choices[index];
    if (FailedChoice(choices)) return;  // answered once everything has finished
    Start(emit);
    if (choice.text.size() <= text_sent_ && event.new_token_ids.empty()) return;
    std::string delta = choice.text.substr(text_sent_);
    text_sent_ = choice.text.size();
    json lp = nullptr;
    if (o_.logprobs) {
      lp = ChatLogprobEntries(ctx, choice, logprobs_sent_);
      logprobs_sent_ = choice.output_logprobs.size();
    }
    auto send = [this, &emit](json d, json l) { OnDelta(std::move(d), std::move(l), emit); };
    output_->Stream(0, &delta, std::move(lp), send);
  }

  void StreamEnd(const ServerContext& ctx, const std::vector<ChoiceState>& choices,
                 const Emit& emit) override {
    Start(emit);
    if (auto failed = FailedChoice(choices)) {
      json error = {{"code", failed->type}, {"message", failed->message}};
      Send({{"type", "error"},
            {"code", failed->type},
            {"message", failed->message},
            {"param", nullptr}},
           emit);
      json response = Response("failed", json::array(), nullptr);
      response["error"] = std::move(error);
      Send({{"type", "response.failed"}, {"response", std::move(response)}}, emit);
      return;
    }
    auto send = [this, &emit](json d, json l) { OnDelta(std::move(d), std::move(l), emit); };
    output_->Stream(0, nullptr, nullptr, send);
    // An empty answer is still one (empty) message, as in the non-streamed form.
    if (done_.empty() && kind_ == Kind::kNone) Open(Kind::kMessage, -1, nullptr, emit);
    const ChoiceState& choice = choices[0];
    const char* status = StatusOf(choice);
    Close(emit, status);
    json response = Response(status, done_, ResponseUsage(ctx, choice, reasoning_text_));
    Keep(response);
    const bool completed = std::string_view(status) == "completed";
    Send({{"type", completed ? "response.completed" : "response.incomplete"},
          {"response", std::move(response)}},
         emit);
  }

  bool background() const { return o_.background; }
  const std::string& id() const { return o_.id; }

  // A background response before its result: stored (so GET polls it and cancel finds it) and
  // returned as the immediate answer.
  json KeepQueued() const {
    json response = Response("queued", json::array(), nullptr);
    Keep(response, /*with_output=*/false);
    return response;
  }

  // A background response that ended without a result (refused, failed): stored as failed.
  void KeepFailed(const json& error) const {
    json response = Response("failed", json::array(), nullptr);
    response["error"] = error;
    Keep(response, /*with_output=*/false);
  }

  FormattedResponse Complete(const ServerContext& ctx,
                             const std::vector<ChoiceState>& choices) override {
    if (auto failed = FailedChoice(choices)) {
      if (o_.background) KeepFailed({{"code", failed->type}, {"message", failed->message}});
      return {failed->status, failed->OpenAiBody()};
    }
    const ChoiceState& choice = choices[0];
    const char* status = StatusOf(choice);
    json message = output_->Message(choice.text);
    json output = json::array();
    std::string reasoning;
    if (message["reasoning_content"].is_string()) {
      reasoning = message["reasoning_content"].get<std::string>();
      output.push_back(ReasoningItem("rs_" + o_.id, "completed", reasoning));
    }
    const std::string content =
        message["content"].is_string() ? message["content"].get<std::string>() : std::string();
    const bool calls = message["tool_calls"].is_array() && !message["tool_calls"].empty();
    if (!content.empty() || !calls) {
      json lp = o_.logprobs ? ChatLogprobEntries(ctx, choice, 0) : json::array();
      output.push_back(MessageItem("msg_" + o_.id, status, content, std::move(lp)));
    }
    if (calls) {
      for (const json& call : message["tool_calls"]) {
        const int64_t n = static_cast<int64_t>(output.size());
        if (o_.max_tool_calls && CallsIn(output) >= *o_.max_tool_calls) break;
        output.push_back(CallItem(fmt::format("fc_{}_{}", o_.id, n), "completed",
                                  call["id"].get<std::string>(),
                                  call["function"]["name"].get<std::string>(),
                                  call["function"]["arguments"].get<std::string>()));
      }
    }
    json response = Response(status, std::move(output), ResponseUsage(ctx, choice, reasoning));
    Keep(response);
    return {200, std::move(response)};
  }

 private:
  enum class Kind { kNone, kReasoning, kMessage, kCall };

  static const char* StatusOf(const ChoiceState& choice) {
    if (!choice.finish) return "completed";
    switch (choice.finish->kind) {
      case engine::FinishKind::kLength:
        return "incomplete";
      case engine::FinishKind::kAbort:
        return "cancelled";
      default:
        return "completed";
    }
  }

  static int64_t CallsIn(const json& output) {
    return std::count_if(output.begin(), output.end(),
                         [](const json& item) { return item["type"] == "function_call"; });
  }

  json Response(const char* status, json output, json usage) const {
    json response = {{"id", o_.id},
                     {"object", "response"},
                     {"created_at", o_.created},
                     {"status", status},
                     {"error", nullptr},
                     {"incomplete_details", nullptr},
                     {"model", o_.model},
                     {"output", std::move(output)},
                     {"usage", std::move(usage)}};
    if (std::string_view(status) == "incomplete") {
      response["incomplete_details"] = {{"reason", "max_output_tokens"}};
    }
    for (const auto& [key, value] : o_.echo.items()) response[key] = value;
    return response;
  }

  // store: true keeps the answer for GET and previous_response_id.
  void Keep(const json& response, bool with_output = true) const {
    if (!o_.store || store_ == nullptr) return;
    if (o_.background) {
      // A cancelled background response stays cancelled, whatever its call ends with.
      std::optional<StoredResponse> current = store_->Get(o_.id);
      if (current && current->response.value("status", "") == "cancelled") return;
    }
    StoredResponse entry;
    entry.response = response;
    entry.messages = o_.history;
    if (with_output) entry.messages.push_back(AssistantTurn(response["output"]));
    entry.input_items = o_.input_items;
    store_->Put(o_.id, std::move(entry));
  }

  void Send(json event, const Emit& emit) {
    event["sequence_number"] = sequence_++;
    emit(event);
  }

  void Start(const Emit& emit) {
    if (started_) return;
    started_ = true;
    json response = Response("in_progress", json::array(), nullptr);
    Send({{"type", "response.created"}, {"response", response}}, emit);
    Send({{"type", "response.in_progress"}, {"response", std::move(response)}}, emit);
  }

  // Opens a new output item unless the open one is of this kind (and, for calls, this call).
  void Open(Kind kind, int64_t call_index, const json& call_delta, const Emit& emit) {
    if (kind_ == kind && (kind != Kind::kCall || call_index == call_index_)) return;
    Close(emit, "completed");
    kind_ = kind;
    call_index_ = call_index;
    item_index_ = static_cast<int64_t>(done_.size());
    item_text_.clear();
    item_logprobs_ = json::array();
    json item;
    if (kind == Kind::kReasoning) {
      item_id_ = fmt::format("rs_{}", o_.id);
      item = {{"type", "reasoning"},
              {"id", item_id_},
              {"status", "in_progress"},
              {"summary", json::array()},
              {"content", json::array()}};
    } else if (kind == Kind::kMessage) {
      item_id_ = fmt::format("msg_{}", o_.id);
      item = {{"type", "message"},
              {"id", item_id_},
              {"status", "in_progress"},
              {"role", "assistant"},
              {"content", json::array()}};
    } else {
      item_id_ = fmt::format("fc_{}_{}", o_.id, item_index_);
      const json& function = call_delta.contains("function") ? call_delta["function"] : json();
      call_id_ = StringOf(call_delta, "id");
      if (call_id_.empty()) call_id_ = fmt::format("call_{}_{}", o_.id, item_index_);
      call_name_ = StringOf(function, "name");
      item = CallItem(item_id_, "in_progress", call_id_, call_name_, "");
    }
    Send({{"type", "response.output_item.added"}, {"output_index", item_index_}, {"item", item}},
         emit);
    if (kind == Kind::kReasoning) {
      Send({{"type", "response.content_part.added"},
            {"item_id", item_id_},
            {"output_index", item_index_},
            {"content_index", 0},
            {"part", {{"type", "reasoning_text"}, {"text", ""}}}},
           emit);
    } else if (kind == Kind::kMessage) {
      Send({{"type", "response.content_part.added"},
            {"item_id", item_id_},
            {"output_index", item_index_},
            {"content_index", 0},
            {"part",
             {{"type", "output_text"},
              {"text", ""},
              {"annotations", json::array()},
              {"logprobs", json::array()}}}},
           emit);
    }
  }

  // Finishes the open item: its done events, and the item joins the output.
  void Close(const Emit& emit, const char* status) {
    if (kind_ == Kind::kNone) return;
    json item;
    const json base = {{"item_id", item_id_}, {"output_index", item_index_}};
    if (kind_ == Kind::kReasoning) {
      json done = base;
      done.update(
          {{"type", "response.reasoning_text.done"}, {"content_index", 0}, {"text", item_text_}});
      Send(std::move(done), emit);
      json part = base;
      part.update({{"type", "response.content_part.done"},
                   {"content_index", 0},
                   {"part", {{"type", "reasoning_text"}, {"text", item_text_}}}});
      Send(std::move(part), emit);
      item = ReasoningItem(item_id_, "completed", item_text_);
    } else if (kind_ == Kind::kMessage) {
      json done = base;
      done.update({{"type", "response.output_text.done"},
                   {"content_index", 0},
                   {"text", item_text_},
                   {"logprobs", item_logprobs_}});
      Send(std::move(done), emit);
      item = MessageItem(item_id_, status, item_text_, item_logprobs_);
      json part = base;
      part.update({{"type", "response.content_part.done"},
                   {"content_index", 0},
                   {"part", item["content"][0]}});
      Send(std::move(part), emit);
    } else {
      json done = base;
      done.update({{"type", "response.function_call_arguments.done"},
                   {"name", call_name_},
                   {"arguments", item_text_}});
      Send(std::move(done), emit);
      item = CallItem(item_id_, "completed", call_id_, call_name_, item_text_);
    }
    Send({{"type", "response.output_item.done"}, {"output_index", item_index_}, {"item", item}},
         emit);
    done_.push_back(std::move(item));
    kind_ = Kind::kNone;
  }

  // One chat delta from ChatOutput::Stream.
  void OnDelta(json delta, json lp, const Emit& emit) {
    if (delta.contains("reasoning_content")) {
      const std::string text = delta["reasoning_content"].get<std::string>();
      reasoning_text_ += text;
      Open(Kind::kReasoning, -1, nullptr, emit);
      item_text_ += text;
      Send({{"type", "response.reasoning_text.delta"},
            {"item_id", item_id_},
            {"output_index", item_index_},
            {"content_index", 0},
            {"delta", text}},
           emit);
    } else if (delta.contains("content")) {
      const std::string text = delta["content"].get<std::string>();
      if (text.empty() && (lp.is_null() || lp.empty())) return;
      Open(Kind::kMessage, -1, nullptr, emit);
      item_text_ += text;
      if (!lp.is_array()) lp = json::array();
      for (const json& entry : lp) item_logprobs_.push_back(entry);
      Send({{"type", "response.output_text.delta"},
            {"item_id", item_id_},
            {"output_index", item_index_},
            {"content_index", 0},
            {"delta", text},
            {"logprobs", std::move(lp)}},
           emit);
    } else if (delta.contains("tool_calls")) {
      for (const json& call : delta["tool_calls"]) {
        const int64_t index = call.value("index", int64_t{0});
        if (index != call_index_ || kind_ != Kind::kCall) {
          if (o_.max_tool_calls && calls_opened_ >= *o_.max_tool_calls) continue;
          ++calls_opened_;
          Open(Kind::kCall, index, call, emit);
        }
        const std::string arguments =
            call.contains("function") ? StringOf(call["function"], "arguments") : "";
        if (arguments.empty()) continue;
        item_text_ += arguments;
        Send({{"type", "response.function_call_arguments.delta"},
              {"item_id", item_id_},
              {"output_index", item_index_},
              {"delta", arguments}},
             emit);
      }
    }
  }

  ResponsesOptions o_;
  std::unique_ptr<ChatOutput> output_;
  ResponseStore* store_;  // null: nothing is kept
  int64_t sequence_ = 0;
  bool started_ = false;
  size_t text_sent_ = 0;
  size_t logprobs_sent_ = 0;
  // The open output item.
  Kind kind_ = Kind::kNone;
  int64_t item_index_ = 0;
  int64_t call_index_ = -1;
  int64_t calls_opened_ = 0;
  std::string item_id_;
  std::string item_text_;  // text, reasoning text or call arguments so far
  json item_logprobs_ = json::array();
  std::string call_id_;
  std::string call_name_;
  std::string reasoning_text_;
  json done_ = json::array();  // finished items, in output order
};

}  // namespace

ApiExpected<ServingPlan> ParseResponses(ServerContext& ctx, std::string_view body_text) {
  ordered_json body;
  RADIX_ASSIGN_OR_RETURN(body, ParseOrderedJsonObjectBody(body_text));
  for (const auto& [key, why] : kUnsupported) {
    if (!IsNullOr(body, key)) return FieldError(key, why);
  }
  static const std::array kKnown = {"model",
                                    "input",
                                    "instructions",
                                    "max_output_tokens",
                                    "temperature",
                                    "top_p",
                                    "stream",
                                    "stream_options",
                                    "store",
                                    "previous_response_id",
                                    "metadata",
                                    "tools",
                                    "tool_choice",
                                    "parallel_tool_calls",
                                    "max_tool_calls",
                                    "text",
                                    "reasoning",
                                    "top_logprobs",
                                    "include",
                                    "truncation",
                                    "background",
                                    "service_tier",
                                    "user",
                                    "safety_identifier",
                                    "prompt_cache_key",
                                    "prompt_cache_retention",
                                    "request_id",
                                    "chat_template_kwargs"};
  for (const auto& entry : body.items()) {
    const std::string& key = entry.key();
    const auto known = [&key](const char* name) { return key == name; };
    if (std::none_of(kKnown.begin(), kKnown.end(), known) &&
        std::none_of(kChatExtras.begin(), kChatExtras.end(), known)) {
      ApiError error =
          InvalidRequest(fmt::format("Unrecognized request argument supplied: {}", key));
      error.param = key;
      return error;
    }
  }
  if (!body.contains("input")) {
    return InvalidRequest("Missing required parameter: 'input'.");
  }
  bool background = false;
  if (!IsNullOr(body, "background")) {
    if (!body["background"].is_boolean()) return FieldError("background", "must be a boolean.");
    background = body["background"].get<bool>();
  }
  if (background && !IsNullOr(body, "stream") && body["stream"] == true &&
      ctx.background_streams == nullptr) {
    return FieldError("background", "this server keeps no background streams.");
  }
  if (background && !IsNullOr(body, "store") && body["store"] == false) {
    return FieldError("background", "background responses need store: true.");
  }
  if (!IsNullOr(body, "truncation") && body["truncation"] != "disabled") {
    return FieldError("truncation",
                      "only \"disabled\" is supported: a conversation longer than the context "
                      "is refused, not cut.");
  }
  if (!IsNullOr(body, "service_tier") && body["service_tier"] != "auto" &&
      body["service_tier"] != "default") {
    return FieldError("service_tier", "this server has one tier: \"auto\" or \"default\".");
  }
  if (!IsNullOr(body, "prompt_cache_retention") && body["prompt_cache_retention"] != "in_memory") {
    return FieldError("prompt_cache_retention",
                      "prefixes live in the in-memory radix cache only: \"in_memory\".");
  }
  if (!IsNullOr(body, "stream_options")) {
    const ordered_json& options = body["stream_options"];
    if (!options.is_object()) return FieldError("stream_options", "must be an object.");
    for (const auto& [key, value] : options.items()) {
      if (key != "include_obfuscation") {
        return FieldError("stream_options", fmt::format("unknown field '{}'.", key));
      }
      if (value == true) {
        return FieldError("stream_options.include_obfuscation",
                          "obfuscation padding is not produced; pass false.");
      }
    }
  }
  bool logprobs = false;
  if (!IsNullOr(body, "include")) {
    if (!body["include"].is_array()) return FieldError("include", "must be a list.");
    for (const auto& entry : body["include"]) {
      if (entry != "message.output_text.logprobs") {
        return FieldError("include", fmt::format("{} is not supported; only "
                                                 "\"message.output_text.logprobs\" is.",
                                                 entry.dump()));
      }
      logprobs = true;
    }
  }
  int64_t top_logprobs = 0;
  if (!IsNullOr(body, "top_logprobs")) {
    if (!body["top_logprobs"].is_number_integer() || body["top_logprobs"] < 0 ||
        body["top_logprobs"] > 20) {
      return FieldError("top_logprobs", "must be an integer in [0, 20].");
    }
    top_logprobs = body["top_logprobs"].get<int64_t>();
    if (top_logprobs > 0) logprobs = true;
  }
  std::optional<int64_t> max_tool_calls;
  if (!IsNullOr(body, "max_tool_calls")) {
    if (!body["max_tool_calls"].is_number_integer() || body["max_tool_calls"] < 1) {
      return FieldError("max_tool_calls", "must be a positive integer.");
    }
    max_tool_calls = body["max_tool_calls"].get<int64_t>();
  }
  bool store = true;
  if (!IsNullOr(body, "store")) {
    if (!body["store"].is_boolean()) return FieldError("store", "must be a boolean.");
    store = body["store"].get<bool>();
  }
  if (!IsNullOr(body, "metadata")) {
    const ordered_json& metadata = body["metadata"];
    if (!metadata.is_object() || metadata.size() > 16 ||
        std::any_of(metadata.begin(), metadata.end(),
                    [](const ordered_json& v) { return !v.is_string(); })) {
      return FieldError("metadata", "must be an object of at most 16 string values.");
    }
  }
  for (const char* key : {"instructions", "previous_response_id", "user", "safety_identifier",
                          "prompt_cache_key", "request_id"}) {
    if (!IsNullOr(body, key) && !body[key].is_string()) return FieldError(key, "must be a string.");
  }

  ResponsesOptions o;
  o.id = body.contains("request_id") && body["request_id"].is_string()
             ? body["request_id"].get<std::string>()
             : "resp_" + NewRid(ctx);
  o.created = openai::NowSeconds();
  o.logprobs = logprobs;
  o.max_tool_calls = max_tool_calls;
  o.store = store;
  o.background = background;

  // The conversation: the previous response's, then this input.
  if (!IsNullOr(body, "previous_response_id")) {
    const std::string previous = body["previous_response_id"].get<std::string>();
    std::optional<StoredResponse> stored =
        ctx.response_store != nullptr ? ctx.response_store->Get(previous) : std::nullopt;
    if (!stored) {
      ApiError error{404, fmt::format("Previous response with id '{}' not found.", previous),
                     "NotFoundError", "previous_response_id"};
      return error;
    }
    o.history = std::move(stored->messages);
  }
  if (auto error = AppendInput(body["input"], o.id, o.history, o.input_items)) return *error;

  ordered_json chat = ordered_json::object();
  chat["messages"] = ordered_json::array();
  if (!IsNullOr(body, "instructions")) {
    chat["messages"].push_back({{"role", "system"}, {"content", body["instructions"]}});
  }
  for (const auto& message : o.history) chat["messages"].push_back(message);
  chat["rid"] = o.id;
  for (const char* key : {"model", "temperature", "top_p", "stream", "parallel_tool_calls"}) {
    if (!IsNullOr(body, key)) chat[key] = body[key];
  }
  for (const char* key : kChatExtras) {
    if (!IsNullOr(body, key)) chat[key] = body[key];
  }
  if (!IsNullOr(body, "max_output_tokens")) chat["max_tokens"] = body["max_output_tokens"];
  if (logprobs) {
    chat["logprobs"] = true;
    chat["top_logprobs"] = top_logprobs;
  }
  if (!IsNullOr(body, "tools")) {
    RADIX_ASSIGN_OR_RETURN(chat["tools"], ChatTools(body["tools"]));
  }
  if (!IsNullOr(body, "tool_choice")) {
    RADIX_ASSIGN_OR_RETURN(chat["tool_choice"], ChatToolChoice(body["tool_choice"]));
  }
  if (!IsNullOr(body, "text")) {
    std::optional<ordered_json> format;
    RADIX_ASSIGN_OR_RETURN(format, ChatResponseFormat(body["text"]));
    if (format) chat["response_format"] = std::move(*format);
  }
  ordered_json kwargs = ordered_json::object();
  if (!IsNullOr(body, "chat_template_kwargs")) {
    if (!body["chat_template_kwargs"].is_object()) {
      return FieldError("chat_template_kwargs", "must be an object.");
    }
    kwargs = body["chat_template_kwargs"];
  }
  json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (!IsNullOr(body, "reasoning")) {
    const ordered_json& r = body["reasoning"];
    if (!r.is_object()) return FieldError("reasoning", "must be an object.");
    for (const auto& [key, value] : r.items()) {
      if (key == "effort") {
        if (value.is_null()) continue;
        if (!value.is_string()) return FieldError("reasoning.effort", "must be a string.");
        // The chat templates of reasoning models read it (gpt-oss: "Reasoning: high").
        kwargs["reasoning_effort"] = value;
        reasoning["effort"] = value;
      } else if (key == "summary" || key == "generate_summary") {
        if (!value.is_null()) {
          return FieldError("reasoning." + key,
                            "reasoning summaries are not produced; the thinking itself comes as "
                            "the reasoning item's content (--reasoning-parser).");
        }
      } else {
        return FieldError("reasoning", fmt::format("unknown field '{}'.", key));
      }
    }
  }
  if (!kwargs.empty()) chat["chat_template_kwargs"] = std::move(kwargs);

  ChatCall call;
  RADIX_ASSIGN_OR_RETURN(call, ParseChatCall(ctx, chat));
  o.model = call.model;
  json tools_echo = json::array();
  if (!IsNullOr(body, "tools")) tools_echo = body["tools"];
  // A request field as the Response object repeats it: null when the request left it out.
  const auto echoed = [&body](const char* key) {
    return IsNullOr(body, key) ? json(nullptr) : json(body[key]);
  };
  o.echo = {
      {"background", background},
      {"instructions", echoed("instructions")},
      {"max_output_tokens", echoed("max_output_tokens")},
      {"max_tool_calls", max_tool_calls ? json(*max_tool_calls) : json(nullptr)},
      {"metadata", IsNullOr(body, "metadata") ? json::object() : json(body["metadata"])},
      {"parallel_tool_calls", IsNullOr(body, "parallel_tool_calls") ||
                                  !body["parallel_tool_calls"].is_boolean() ||
                                  body["parallel_tool_calls"].get<bool>()},
      {"previous_response_id", echoed("previous_response_id")},
      {"reasoning", std::move(reasoning)},
      {"service_tier", "default"},
      {"store", store},
      {"temperature", echoed("temperature")},
      {"text", IsNullOr(body, "text") ? json{{"format", {{"type", "text"}}}} : json(body["text"])},
      {"tool_choice", IsNullOr(body, "tool_choice") ? json("auto") : json(body["tool_choice"])},
      {"tools", std::move(tools_echo)},
      {"top_logprobs", top_logprobs},
      {"top_p", echoed("top_p")},
      {"truncation", "disabled"},
      {"user", echoed("user")},
      {"safety_identifier", echoed("safety_identifier")},
      {"prompt_cache_key", echoed("prompt_cache_key")}};
  if (!store) o.history = ordered_json::array();

  ServingPlan plan = std::move(call.plan);
  plan.end_marker = false;   // OpenAI's Responses streams end after response.completed
  plan.named_events = true;  // and name each event ("event: response.output_text.delta")
  plan.formatter = std::make_shared<ResponsesFormatter>(std::move(o), std::move(call.output),
                                                        ctx.response_store);
  return plan;
}

namespace {

// Where a background response's call writes: no client. Its result reaches the response store
// through the formatter (Complete / StreamEnd keep it; a refusal is kept as failed here); with
// stream: true its events go to the response's EventLog, which the clients read. Formatting runs
// on `queue` (one thread: in order), neither on the engine thread nor on an I/O thread.
class DetachedWriter final : public ResponseWriter {
 public:
  DetachedWriter(std::shared_ptr<ResponsesFormatter> formatter, std::shared_ptr<EventLog> log,
                 WorkQueue* queue)
      : formatter_(std::move(formatter)), log_(std::move(log)), queue_(queue) {}
  void Send(int status, std::string, std::string body) override {
    if (status == 200) return;
    json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
    json error =
        parsed.is_object() && parsed.contains("error") ? parsed["error"] : json{{"message", body}};
    const std::string code = error.value("type", "server_error");
    const std::string message = error.value("message", body);
    formatter_->KeepFailed({{"code", code}, {"message", message}});
    if (log_) {
      log_->Append(
          "error",
          ToJsonText(
              json{{"type", "error"}, {"code", code}, {"message", message}, {"param", nullptr}}));
      log_->Close();
    }
  }
  void StartStream() override {}
  void SendEvent(std::string data) override {
    if (log_) log_->Append("", std::move(data));
  }
  void SendNamedEvent(std::string name, std::string data) override {
    if (log_) log_->Append(std::move(name), std::move(data));
  }
  void EndStream() override {
    if (log_) log_->Close();
  }
  void OnDisconnect(std::function<void()>) override {}  // nobody to lose
  void Post(std::function<void()> task) override {
    if (queue_ == nullptr) return task();
    queue_->Post(std::move(task));
  }

 private:
  std::shared_ptr<ResponsesFormatter> formatter_;
  std::shared_ptr<EventLog> log_;  // null: not streamed
  WorkQueue* queue_;
};

}  // namespace

void HandleResponses(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer) {
  ApiExpected<ServingPlan> plan = ParseResponses(ctx, body);
  std::shared_ptr<ResponsesFormatter> formatter =
      plan.ok() ? std::dynamic_pointer_cast<ResponsesFormatter>(plan->formatter) : nullptr;
  if (formatter == nullptr || !formatter->background()) {
    return Serve(ctx, std::move(writer), ErrorStyle::kOpenAi, std::move(plan));
  }
  // Background: the call runs on whatever becomes of this client. Not streamed: answer "queued"
  // now, GET /v1/responses/{id} polls it. Streamed: this client reads the response's event log
  // live; it (or another) may read it again from any point with GET ...?stream=true.
  const json queued = formatter->KeepQueued();
  std::shared_ptr<EventLog> log;
  if (plan->stream) log = ctx.background_streams->Create(formatter->id());
  Serve(ctx, std::make_shared<DetachedWriter>(formatter, log, ctx.background_queue),
        ErrorStyle::kOpenAi, std::move(plan));
  if (log) return log->Subscribe(-1, std::move(writer));
  SendResult(*writer, queued);
}

namespace {

// GET /v1/responses/{id}/input_items: OpenAI's list page over a stored response's input items
// (limit 1-100, default 20; order desc (default) or asc; after / before an item id).
ApiExpected<json> InputItemsPage(const json& items, const std::map<std::string, std::string>& q) {
  int64_t limit = 20;
  if (auto it = q.find("limit"); it != q.end()) {
    char* end = nullptr;
    limit = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || limit < 1 || limit > 100) {
      return FieldError("limit", "limit must be an integer from 1 to 100");
    }
  }
  std::string order = "desc";
  if (auto it = q.find("order"); it != q.end()) order = it->second;
  if (order != "asc" && order != "desc") return FieldError("order", "order must be asc or desc");
  std::vector<json> ordered(items.begin(), items.end());
  if (order == "desc") std::reverse(ordered.begin(), ordered.end());
  size_t begin = 0;
  size_t end = ordered.size();
  const auto position = [&](const std::string& field) -> ApiExpected<size_t> {
    const std::string& cursor = q.at(field);
    for (size_t i = 0; i < ordered.size(); ++i) {
      if (ordered[i].value("id", "") == cursor) return i;
    }
    return FieldError(field, fmt::format("no input item with id '{}'", cursor));
  };
  if (q.count("after")) {
    RADIX_ASSIGN_OR_RETURN(size_t at, position("after"));
    begin = at + 1;
  }
  if (q.count("before")) {
    RADIX_ASSIGN_OR_RETURN(size_t at, position("before"));
    end = std::min(end, at);
  }
  json data = json::array();
  for (size_t i = begin; i < end && data.size() < static_cast<size_t>(limit); ++i) {
    data.push_back(ordered[i]);
  }
  const bool has_more = begin + data.size() < end;
  return json{{"object", "list"},
              {"data", data},
              {"first_id", data.empty() ? json(nullptr) : data.front()["id"]},
              {"last_id", data.empty() ? json(nullptr) : data.back()["id"]},
              {"has_more", has_more}};
}

}  // namespace

void HandleResponseById(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer) {
  std::string id = request.path_param;
  const bool cancel = id.ends_with("/cancel");
  if (cancel) id.resize(id.size() - std::string_view("/cancel").size());
  const bool input_items = id.ends_with("/input_items");
  if (input_items) id.resize(id.size() - std::string_view("/input_items").size());
  auto not_found = [&id] {
    return ApiError{404, fmt::format("Response with id '{}' not found.", id), "NotFoundError", {}};
  };
  std::optional<StoredResponse> stored;
  if (ctx.response_store != nullptr && id.find('/') == std::string::npos) {
    stored = ctx.response_store->Get(id);
  }
  if (!stored) return SendResult(*writer, not_found());
  if (cancel) {
    if (request.method != "POST") {
      return SendResult(*writer, ApiError{405, "Use POST to cancel.", "MethodNotAllowed", {}});
    }
    if (stored->response.value("background", false) != true) {
      return SendResult(*writer, BadRequest("Cannot cancel a synchronous response: only "
                                            "background responses can be cancelled."));
    }
    const std::string status = stored->response.value("status", "");
    if (status != "queued" && status != "in_progress") {
      return SendResult(
          *writer, BadRequest(fmt::format("Cannot cancel a response with status '{}'.", status)));
    }
    // The engine request carries the response id as its rid; its end keeps "cancelled" too.
    ctx.engine->Abort(id, engine::AbortMatch::kExactRid);
    stored->response["status"] = "cancelled";
    ctx.response_store->Put(id, *stored);
    return SendResult(*writer, stored->response);
  }
  if (request.method == "GET" && request.query.count("stream") &&
      request.query.at("stream") == "true") {
    // Resuming a background stream (OpenAI: stream=true, starting_after=<sequence number>).
    std::shared_ptr<EventLog> log =
        ctx.background_streams ? ctx.background_streams->Find(id) : nullptr;
    if (!log) {
      return SendResult(*writer, FieldError("stream",
                                            "only background responses created with "
                                            "stream: true can be streamed again."));
    }
    int64_t after = -1;
    if (auto it = request.query.find("starting_after"); it != request.query.end()) {
      char* end = nullptr;
      after = std::strtoll(it->second.c_str(), &end, 10);
      if (it->second.empty() || *end != '\0' || after < -1) {
        return SendResult(*writer, FieldError("starting_after",
                                              "starting_after must be an event sequence number."));
      }
    }
    return log->Subscribe(after, std::move(writer));
  }
  if (input_items) {
    if (request.method != "GET") {
      return SendResult(*writer,
                        ApiError{405, "Use GET to list input items.", "MethodNotAllowed", {}});
    }
    return SendResult(*writer, InputItemsPage(stored->input_items, request.query));
  }
  if (request.method == "DELETE") {
    ctx.response_store->Erase(id);
    return SendResult(*writer, json{{"id", id}, {"object", "response"}, {"deleted", true}});
  }
  if (request.method != "GET") {
    return SendResult(*writer, ApiError{405, "Use GET or DELETE.", "MethodNotAllowed", {}});
  }
  SendResult(*writer, stored->response);
}

}  // namespace radixserve::api

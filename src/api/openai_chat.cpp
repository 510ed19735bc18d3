#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "api/openai_api.h"
#include "api/json_body.h"
#include "api/json_fields.h"
#include "api/openai_common.h"
#include "api/openai_tools.h"
#include "api/request_builder.h"
#include "chat/reasoning_parser.h"

namespace radixserve::api {
namespace {

using namespace openai;

const char* const kRoles[] = {"system", "user", "assistant", "tool", "function", "developer"};

// Messages as the template wants them; roles lower-cased and checked.
chat::Json PrepareMessages(const chat::Json& messages, chat::ContentFormat format) {
  chat::Json out = chat::Json::array();
  for (const auto& message : messages) {
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      throw ValidationError("Each message must be an object with a string 'role'.");
    }
    std::string role = message["role"].get<std::string>();
    std::transform(role.begin(), role.end(), role.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (std::find(std::begin(kRoles), std::end(kRoles), role) == std::end(kRoles)) {
      throw ValidationError(fmt::format("Invalid message role '{}'.", role));
    }
    const chat::Json& content = message.contains("content") ? message["content"] : chat::Json();
    if (!content.is_null() && !content.is_string() && !content.is_array()) {
      throw ValidationError("Message content must be a string or a list of content parts.");
    }
    if (content.is_array()) {
      for (const auto& part : content) {
        if (!part.is_object() || !part.contains("type")) {
          throw ValidationError("Each content part must be an object with a 'type'.");
        }
        std::string type = part["type"].is_string() ? part["type"].get<std::string>() : "";
        if (type != "text") {
          throw ValidationError(fmt::format(
              "Content parts of type '{}' are not supported: this model takes text only.", type));
        }
      }
    }
    chat::Json ordered = message;
    ordered["role"] = role;
    // A null content (an assistant turn that only called tools) is empty text, as SGLang has it:
    // templates concatenate content.
    if (content.is_null()) ordered["content"] = "";
    out.push_back(chat::PrepareMessage(ordered, format));
  }
  return out;
}

json ChatLogprobs(const ServerContext& ctx, const ChoiceState& choice, size_t from) {
  json content = json::array();
  for (size_t i = from; i < choice.output_logprobs.size(); ++i) {
    const auto& info = choice.output_logprobs[i];
    std::string token = TokenText(ctx, info.token_id);
    json top = json::array();
    for (const auto& [id, lp] : info.top) {
      std::string alt = TokenText(ctx, id);
      top.push_back({{"token", alt}, {"bytes", Bytes(alt)}, {"logprob", lp}});
    }
    content.push_back({{"token", token},
                       {"bytes", Bytes(token)},
                       {"logprob", info.logprob},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json Chunk(const std::string& id, int64_t created, const std::string& model, json choice) {
  return {{"id", id},       {"object", "chat.completion.chunk"},           {"created", created},
          {"model", model}, {"choices", json::array({std::move(choice)})}, {"usage", nullptr}};
}

// What one call's choices need to turn model text into reasoning, content and tool calls.
struct ChatOutput {
  ChatOutput(std::shared_ptr<const ToolRequest> request,
             std::shared_ptr<const chat::ToolCallParser> tool_parser,
             std::shared_ptr<const chat::ReasoningParser> reasoning_parser, size_t choices)
      : tools(std::move(request)),
        parser(std::move(tool_parser)),
        reasoning(std::move(reasoning_parser)) {
    streamers.reserve(choices);
    for (size_t i = 0; i < choices; ++i) {
      streamers.emplace_back(*tools, parser.get());
      if (reasoning) reasoning_streams.push_back(reasoning->NewStream());
    }
  }

  // One streamed text delta (or the end of the output, `delta` null) of choice `index`, as
  // chunks: reasoning first, then content, then tool-call deltas; `lp` (this step's logprobs)
  // rides on the first chunk, or on an empty content chunk when there is none.
  template <typename Send>
  void Stream(size_t index, const std::string* delta, json lp, Send& send) {
    std::string answer = delta != nullptr ? *delta : std::string();
    if (reasoning) {
      chat::ReasoningResult split = delta != nullptr ? reasoning_streams[index].Feed(*delta)
                                                     : reasoning_streams[index].Finish();
      if (!split.reasoning_text.empty()) {
        send({{"reasoning_content", std::move(split.reasoning_text)}}, std::move(lp));
        lp = nullptr;
      }
      answer = std::move(split.normal_text);
    }
    ToolCallStreamer::Out out = streamers[index].Feed(answer);
    if (delta == nullptr) {
      ToolCallStreamer::Out rest = streamers[index].Finish();
      out.content += rest.content;
      for (auto& call : rest.tool_calls) out.tool_calls.push_back(std::move(call));
    }
    if (!out.content.empty() || (out.tool_calls.empty() && !lp.is_null())) {
      send({{"content", std::move(out.content)}}, std::move(lp));
      lp = nullptr;
    }
    if (!out.tool_calls.empty()) send({{"tool_calls", std::move(out.tool_calls)}}, std::move(lp));
  }

  // The whole output of a finished choice: reasoning_content, content and tool_calls.
  json Message(const std::string& text) const {
    json reasoning_content = nullptr;
    std::string answer = text;
    if (reasoning) {
      chat::ReasoningResult split = reasoning->Parse(text);
      if (!split.reasoning_text.empty()) reasoning_content = std::move(split.reasoning_text);
      answer = std::move(split.normal_text);
    }
    ToolCallAnswer calls = ParseToolCalls(*tools, parser.get(), answer);
    return {{"role", "assistant"},
            {"content", std::move(calls.content)},
            {"reasoning_content", std::move(reasoning_content)},
            {"tool_calls", std::move(calls.tool_calls)}};
  }

  std::shared_ptr<const ToolRequest> tools;
  std::shared_ptr<const chat::ToolCallParser> parser;
  std::shared_ptr<const chat::ReasoningParser> reasoning;  // null: no separation
  // One per choice; used under the tracker's lock.
  std::vector<ToolCallStreamer> streamers;
  std::vector<chat::ReasoningStream> reasoning_streams;
};

bool IsStop(const ChoiceState& choice) {
  return choice.finish && choice.finish->kind == engine::FinishKind::kStop;
}

// SGLang turns "stop" into "tool_calls" when the text held calls.
std::string ToolAwareFinish(const ChoiceState& choice, bool called) {
  return called && IsStop(choice) ? "tool_calls" : FinishReasonName(choice);
}

}  // namespace

void HandleChatCompletions(ServerContext& ctx, const std::string& body_text,
                           ResponseWriterPtr writer) {
  auto parsed = ParseJsonBody(body_text);
  if (!parsed.ok()) {
    SendValidationError(*writer, parsed.status().message());
    return;
  }
  const json& body = *parsed;
  if (!body.is_object()) {
    SendValidationError(*writer, "The request body must be a JSON object.");
    return;
  }
  std::vector<engine::GenerateRequest> requests;
  auto tools = std::make_shared<ToolRequest>();
  std::shared_ptr<const chat::ToolCallParser> tool_parser;
  std::shared_ptr<const chat::ReasoningParser> reasoning_parser;
  std::optional<int32_t> grammar_start_token;
  std::string model;
  bool stream = false, include_usage = false, logprobs = false;
  int64_t n = 1;
  try {
    model = OptString(body, "model").value_or("default");
    stream = OptBool(body, "stream").value_or(false);
    if (body.contains("stream_options") && !body["stream_options"].is_null()) {
      if (!body["stream_options"].is_object()) {
        throw ValidationError("stream_options must be an object.");
      }
      include_usage = OptBool(body["stream_options"], "include_usage").value_or(false);
    }
    logprobs = OptBool(body, "logprobs").value_or(false);
    int64_t top_logprobs = OptInt(body, "top_logprobs").value_or(0);
    if (top_logprobs < 0 || top_logprobs > ctx.limits.max_top_logprobs) {
      throw ValidationError(fmt::format(
          "top_logprobs must be in [0, {}] (the server's --max-top-logprobs), got {}.",
          ctx.limits.max_top_logprobs, top_logprobs));
    }
    n = RequireN(ctx, body, "n");
    if (!body.contains("messages") || !body["messages"].is_array()) {
      throw ValidationError("Field 'messages' is required and must be a list.");
    }
    if (body["messages"].empty()) {
      SendError(*writer, BadRequest("Messages cannot be empty."));
      return;
    }
    if (ctx.chat_template == nullptr) {
      SendError(*writer, BadRequest("This model has no chat template; pass --chat-template or "
                                    "use /v1/completions."));
      return;
    }
    chat::ChatRenderInput input;
    // Templates see the client's key order (tools | tojson), so read messages order-preserving.
    chat::Json ordered_body = ParseOrderedJsonBody(body_text).value();  // parsed once already
    *tools = ReadToolRequest(ordered_body);
    if (tools->mode != ToolChoiceMode::kNone) {
      auto parser_name = ctx.args->GetOptionalString("tool-call-parser");
      if (parser_name) {
        auto created = chat::ToolCallParser::Create(*parser_name, tools->tools);
        if (!created.ok()) throw RequestError(created.status().message());
        tool_parser = std::shared_ptr<const chat::ToolCallParser>(std::move(created).value());
      }
    }
    input.messages = PrepareMessages(ordered_body["messages"], ctx.chat_template->content_format());
    for (chat::Json& message : input.messages) NormalizeHistoryToolCalls(message);
    input.tools = tools->template_tools;
    input.continue_final_message = OptBool(body, "continue_final_message").value_or(false);
    input.add_generation_prompt = !input.continue_final_message;
    if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
      if (!body["chat_template_kwargs"].is_object()) {
        throw ValidationError("chat_template_kwargs must be an object.");
      }
      input.template_kwargs = ordered_body["chat_template_kwargs"];
    }
    auto prompt = ctx.chat_template->Render(input);
    if (!prompt.ok()) {
      SendError(*writer, BadRequest(prompt.status().message()));
      return;
    }
    // --reasoning-parser: thinking goes to reasoning_content unless separate_reasoning is false
    // (a constraint starts after the thinking either way).
    const bool separate = OptBool(body, "separate_reasoning").value_or(true);
    const bool stream_reasoning = OptBool(body, "stream_reasoning").value_or(true);
    if (auto name = ctx.args->GetOptionalString("reasoning-parser")) {
      chat::ReasoningParserOptions options;
      options.stream_reasoning = stream_reasoning;
      if (chat::ReasoningEnabledByRequest(*name, input.template_kwargs)) {
        options.force_reasoning = true;
      }
      auto force_nonempty = input.template_kwargs.find("force_nonempty_content");
      options.force_nonempty_content = force_nonempty != input.template_kwargs.end() &&
                                       force_nonempty->is_boolean() && force_nonempty->get<bool>();
      auto created = chat::ReasoningParser::Create(*name, options);
      if (!created.ok()) throw RequestError(created.status().message());
      reasoning_parser = std::shared_ptr<const chat::ReasoningParser>(std::move(created).value());
      // With thinking on, constraints apply to the answer only: the grammar starts after the
      // end-of-thinking token (when it is one token of the vocabulary; otherwise, and with
      // thinking off, it constrains the whole output).
      if (reasoning_parser->force_reasoning() && ctx.tokenizer != nullptr &&
          !reasoning_parser->format().think_end.empty()) {
        if (auto id = ctx.tokenizer->TokenToId(reasoning_parser->format().think_end)) {
          grammar_start_token = static_cast<int32_t>(*id);
        }
      }
      if (!separate) reasoning_parser = nullptr;  // the thinking stays in content
    }

    json sampling = SamplingFromOpenAi(body, ordered_body);
    if (tools->constrained()) {
      // SGLang: required / named tool choice is a JSON-schema constraint on a call array.
      for (const char* other : {"json_schema", "regex", "ebnf", "structural_tag"}) {
        if (sampling.contains(other)) {
          throw RequestError(fmt::format(
              "tool_choice \"required\" or a named function cannot be combined with {} (or "
              "response_format): the tool call is the constraint.", other));
        }
      }
      sampling["json_schema"] = ToolCallSchema(*tools);
    }
    auto max_tokens = OptInt(body, "max_completion_tokens");
    if (!max_tokens) max_tokens = OptInt(body, "max_tokens");
    sampling["max_new_tokens"] = max_tokens ? json(*max_tokens) : json(nullptr);
    sampling["n"] = n;
    std::string base_rid = OptString(body, "rid").value_or(NewRid(ctx));
    std::optional<int64_t> priority = OptInt(body, "priority");
    for (int64_t i = 0; i < std::max<int64_t>(n, 1); ++i) {
      BuildOptions options{
          .rid = n > 1 ? fmt::format("{}_{}", base_rid, i) : base_rid,
          .stream = stream,
          .priority = priority,
          .extra_key = CacheNamespace(body),
          .return_logprob = logprobs,
          .logprob_start_len = -1,
          .top_logprobs_num = static_cast<int32_t>(logprobs ? top_logprobs : 0),
          .token_ids_logprob = {},
          .return_text_in_logprobs = false,
          .add_special_tokens = false,
          .apply_model_defaults = ctx.args->GetString("sampling-defaults") == "model",
          .float_fields_are_floats = true};
      BuiltRequest built = BuildGenerateRequest(ctx, {*prompt, std::nullopt}, sampling, options);
      if (built.error) {
        SendError(*writer, *built.error);
        return;
      }
      built.request->sampling.n = 1;
      if (built.request->sampling.HasGrammar()) {
        built.request->grammar_start_token = grammar_start_token;
      }
      requests.push_back(std::move(*built.request));
    }
  } catch (const ValidationError& e) {
    SendValidationError(*writer, e.what());
    return;
  } catch (const RequestError& e) {
    SendError(*writer, BadRequest(e.what()));
    return;
  }

  const std::string id = requests[0].rid;
  const int64_t created = NowSeconds();
  const size_t group = static_cast<size_t>(std::max<int64_t>(n, 1));
  auto output =
      std::make_shared<ChatOutput>(tools, tool_parser, reasoning_parser, requests.size());

  auto on_event = [id, created, model, stream, logprobs, output](
                      CallTracker& call, size_t index, const engine::RequestEvent& event) {
    if (!stream) return;
    ChoiceState& choice = call.choices()[index];
    if (choice.finish && choice.finish->kind == engine::FinishKind::kAbort &&
        choice.finish->status_code >= 400) {
      return;  // reported once everything has finished
    }
    auto send = [&](json delta, json lp) {
      call.writer().SendEvent(ToJsonText(Chunk(id, created, model,
                                               {{"index", index},
                                                {"delta", std::move(delta)},
                                                {"logprobs", std::move(lp)},
                                                {"finish_reason", nullptr},
                                                {"matched_stop", nullptr}})));
    };
    if (choice.text_sent == 0 && choice.logprobs_sent == 0 && choice.ids_sent == 0) {
      choice.ids_sent = 1;  // marks "role chunk sent"
      send({{"role", "assistant"}, {"content", ""}}, nullptr);
    }
    if (choice.text.size() > choice.text_sent || !event.new_token_ids.empty()) {
      std::string delta = choice.text.substr(choice.text_sent);
      choice.text_sent = choice.text.size();
      json lp = nullptr;
      if (logprobs) {
        lp = ChatLogprobs(call.context(), choice, choice.logprobs_sent);
        choice.logprobs_sent = choice.output_logprobs.size();
      }
      output->Stream(index, &delta, std::move(lp), send);
    }
  };
  auto on_done = [id, created, model, stream, include_usage, logprobs, group,
                  output](CallTracker& call) {
    if (AnswerFailedChoice(call, stream)) return;
    auto& choices = call.choices();
    if (stream) {
      for (size_t i = 0; i < choices.size(); ++i) {
        auto send = [&](json delta, json lp) {
          call.writer().SendEvent(ToJsonText(Chunk(id, created, model,
                                                   {{"index", i},
                                                    {"delta", std::move(delta)},
                                                    {"logprobs", std::move(lp)},
                                                    {"finish_reason", nullptr},
                                                    {"matched_stop", nullptr}})));
        };
        output->Stream(i, nullptr, nullptr, send);
        const bool called = output->streamers[i].called();
        call.writer().SendEvent(ToJsonText(Chunk(
            id, created, model,
            {{"index", i},
             {"delta", json::object()},
             {"logprobs", nullptr},
             {"finish_reason", ToolAwareFinish(choices[i], called)},
             {"matched_stop", called && IsStop(choices[i]) ? json(nullptr)
                                                             : MatchedStop(choices[i])}})));
      }
      if (include_usage) {
        call.writer().SendEvent(ToJsonText(UsageChunk(id, "chat.completion.chunk", created, model,
                                                      Usage(call.context(), choices, group))));
      }
      call.writer().SendEvent("[DONE]");
      call.writer().EndStream();
      return;
    }
    json out_choices = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      json message = output->Message(choices[i].text);
      const bool called = !message["tool_calls"].is_null();
      out_choices.push_back(
          {{"index", i},
           {"message", std::move(message)},
           {"logprobs", logprobs ? ChatLogprobs(call.context(), choices[i], 0) : json(nullptr)},
           {"finish_reason", ToolAwareFinish(choices[i], called)},
           {"matched_stop",
            called && IsStop(choices[i]) ? json(nullptr) : MatchedStop(choices[i])}});
    }
    json out = {{"id", id},
                {"object", "chat.completion"},
                {"created", created},
                {"model", model},
                {"choices", out_choices},
                {"usage", Usage(call.context(), choices, group)},
                {"metadata", {{"weight_version", call.context().weight_version}}}};
    call.writer().Send(200, "application/json", ToJsonText(out));
  };
  CallTracker::Start(ctx, writer, std::move(requests), on_event, on_done,
                     RejectionAnswer(writer), group, stream);
}

}  // namespace radixserve::api

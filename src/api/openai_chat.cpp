#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "api/chat_output.h"
#include "api/disagg_fields.h"
#include "api/generate_api.h"
#include "api/json_body.h"
#include "api/json_fields.h"
#include "api/openai_api.h"
#include "api/openai_common.h"
#include "api/openai_fields.h"
#include "api/openai_tools.h"
#include "api/request_builder.h"
#include "api/serving.h"
#include "chat/reasoning_parser.h"

namespace radixserve::api {
namespace {

using namespace openai;

const char* const kRoles[] = {"system", "user", "assistant", "tool", "function", "developer"};

// Messages as the template wants them: roles lower-cased and checked, history tool-call arguments
// parsed (openai_tools.h).
ApiExpected<chat::Json> PrepareMessages(const chat::Json& messages, chat::ContentFormat format) {
  chat::Json out = chat::Json::array();
  for (const auto& message : messages) {
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      return InvalidRequest("Each message must be an object with a string 'role'.");
    }
    std::string role = message["role"].get<std::string>();
    std::transform(role.begin(), role.end(), role.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (std::find(std::begin(kRoles), std::end(kRoles), role) == std::end(kRoles)) {
      return InvalidRequest(fmt::format("Invalid message role '{}'.", role));
    }
    const chat::Json& content = message.contains("content") ? message["content"] : chat::Json();
    if (!content.is_null() && !content.is_string() && !content.is_array()) {
      return InvalidRequest("Message content must be a string or a list of content parts.");
    }
    if (content.is_array()) {
      for (const auto& part : content) {
        if (!part.is_object() || !part.contains("type")) {
          return InvalidRequest("Each content part must be an object with a 'type'.");
        }
        std::string type = part["type"].is_string() ? part["type"].get<std::string>() : "";
        if (type != "text") {
          return InvalidRequest(fmt::format(
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
  for (chat::Json& message : out) {
    if (auto error = NormalizeHistoryToolCalls(message)) return *error;
  }
  return out;
}

bool IsStop(const ChoiceState& choice) {
  return choice.finish && choice.finish->kind == engine::FinishKind::kStop;
}

// SGLang turns "stop" into "tool_calls" when the text held calls.
std::string ToolAwareFinish(const ChoiceState& choice, bool called) {
  return called && IsStop(choice) ? "tool_calls" : FinishReasonName(choice);
}

// /v1/chat/completions answers: chat.completion objects, streamed as chat.completion.chunk deltas
// (role first, then reasoning, content and tool calls as ChatOutput splits them).
class ChatFormatter final : public ResponseFormatter {
 public:
  struct Options {
    std::string id;
    int64_t created = 0;
    std::string model;
    bool logprobs = false;
    bool include_usage = false;
    bool hidden_states = false;
    size_t group = 1;
    // SGLang's per-choice extras (non-streamed calls only): prompt_token_ids, response_token_ids,
    // meta_info (as /generate's, with `meta_shape`'s logprob options).
    bool prompt_token_ids = false;
    bool response_token_ids = false;
    bool meta_info = false;
    engine::GenerateRequest meta_shape;
    // The prompt's ids, for prompt_token_ids and sglext.input_ids.
    std::vector<int32_t> prompt_ids;
    // sglext: cached_tokens_details, input_ids, output_ids (one list per choice).
    bool sglext_cached_tokens_details = false;
    bool sglext_input_ids = false;
    bool sglext_output_ids = false;
  };

  ChatFormatter(Options options, std::unique_ptr<ChatOutput> output, size_t choices)
      : o_(std::move(options)), output_(std::move(output)), cursors_(choices) {}

  void StreamEvent(const ServerContext& ctx, const std::vector<ChoiceState>& choices, size_t index,
                   const engine::RequestEvent& event, const Emit& emit) override {
    const ChoiceState& choice = choices[index];
    if (choice.finish && choice.finish->kind == engine::FinishKind::kAbort &&
        choice.finish->status_code >= 400) {
      return;  // answered once everything has finished
    }
    auto send = DeltaSender(index, emit);
    Cursor& cursor = cursors_[index];
    if (!cursor.role_sent) {
      cursor.role_sent = true;
      send({{"role", "assistant"}, {"content", ""}}, nullptr);
    }
    if (choice.text.size() > cursor.text_sent || !event.new_token_ids.empty()) {
      std::string delta = choice.text.substr(cursor.text_sent);
      cursor.text_sent = choice.text.size();
      json lp = nullptr;
      if (o_.logprobs) {
        lp = {{"content", ChatLogprobEntries(ctx, choice, cursor.logprobs_sent)}};
        cursor.logprobs_sent = choice.output_logprobs.size();
      }
      output_->Stream(index, &delta, std::move(lp), send);
    }
  }

  void StreamEnd(const ServerContext& ctx, const std::vector<ChoiceState>& choices,
                 const Emit& emit) override {
    if (auto failed = FailedChoice(choices)) {
      emit(StreamErrorBody(ErrorStyle::kOpenAi, *failed));
      return;
    }
    for (size_t i = 0; i < choices.size(); ++i) {
      auto send = DeltaSender(i, emit);
      output_->Stream(i, nullptr, nullptr, send);
      if (o_.hidden_states) send({{"hidden_states", LastHiddenState(choices[i])}}, nullptr);
      const bool called = output_->streamers[i].called();
      emit(Chunk({{"index", i},
                  {"delta", json::object()},
                  {"logprobs", nullptr},
                  {"finish_reason", ToolAwareFinish(choices[i], called)},
                  {"matched_stop",
                   called && IsStop(choices[i]) ? json(nullptr) : MatchedStop(choices[i])}}));
    }
    if (json ext = Sglext(choices); !ext.empty()) {
      emit(SglextChunk(o_.id, "chat.completion.chunk", o_.created, o_.model, std::move(ext)));
    }
    if (o_.include_usage) {
      emit(UsageChunk(o_.id, "chat.completion.chunk", o_.created, o_.model,
                      Usage(ctx, choices, o_.group)));
    }
  }

  FormattedResponse Complete(const ServerContext& ctx,
                             const std::vector<ChoiceState>& choices) override {
    if (auto failed = FailedChoice(choices)) return {failed->status, failed->OpenAiBody()};
    json out_choices = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      json message = output_->Message(choices[i].text);
      const bool called = !message["tool_calls"].is_null();
      json choice = {
          {"index", i},
          {"message", std::move(message)},
          {"logprobs",
           o_.logprobs ? json{{"content", ChatLogprobEntries(ctx, choices[i], 0)}} : json(nullptr)},
          {"finish_reason", ToolAwareFinish(choices[i], called)},
          {"matched_stop", called && IsStop(choices[i]) ? json(nullptr) : MatchedStop(choices[i])}};
      if (o_.hidden_states) choice["hidden_states"] = LastHiddenState(choices[i]);
      if (o_.prompt_token_ids) choice["prompt_token_ids"] = o_.prompt_ids;
      if (o_.response_token_ids) choice["response_token_ids"] = choices[i].output_ids;
      if (o_.meta_info) choice["meta_info"] = MetaInfoJson(ctx, choices[i], o_.meta_shape);
      out_choices.push_back(std::move(choice));
    }
    json out = Envelope(ctx, o_.id, "chat.completion", o_.created, o_.model, std::move(out_choices),
                        Usage(ctx, choices, o_.group));
    if (json ext = Sglext(choices); !ext.empty()) out["sglext"] = std::move(ext);
    return {200, std::move(out)};
  }

 private:
  // What has been streamed of one choice.
  struct Cursor {
    bool role_sent = false;  // the opening {"role": "assistant"} chunk
    size_t text_sent = 0;
    size_t logprobs_sent = 0;
  };

  // SGLang's response-level extension object; empty when the request asked for none of it.
  json Sglext(const std::vector<ChoiceState>& choices) const {
    json ext = json::object();
    if (choices.empty()) return ext;
    if (o_.sglext_cached_tokens_details) {
      ext["cached_tokens_details"] = CachedTokensDetails(choices[0]);
    }
    if (o_.sglext_input_ids) ext["input_ids"] = o_.prompt_ids;
    if (o_.sglext_output_ids) {
      json ids = json::array();
      for (const ChoiceState& choice : choices) ids.push_back(choice.output_ids);
      ext["output_ids"] = std::move(ids);
    }
    return ext;
  }

  json Chunk(json choice) const {
    return {
        {"id", o_.id},       {"object", "chat.completion.chunk"},           {"created", o_.created},
        {"model", o_.model}, {"choices", json::array({std::move(choice)})}, {"usage", nullptr}};
  }

  // Sends one delta of choice `index` (with this step's logprobs) as a chunk.
  std::function<void(json, json)> DeltaSender(size_t index, const Emit& emit) const {
    return [this, index, &emit](json delta, json lp) {
      emit(Chunk({{"index", index},
                  {"delta", std::move(delta)},
                  {"logprobs", std::move(lp)},
                  {"finish_reason", nullptr},
                  {"matched_stop", nullptr}}));
    };
  }

  Options o_;
  std::unique_ptr<ChatOutput> output_;
  std::vector<Cursor> cursors_;
};

// The template kwargs with the request's reasoning switches added where the client's
// chat_template_kwargs did not set them, as SGLang's ChatCompletionRequest does:
// - reasoning_effort (or SGLang's reasoning: {"effort", "enabled"}): itself as a kwarg
//   (gpt-oss-style templates read it), and thinking / enable_thinking = effort != "none"
//   (DeepSeek- and Qwen3-style templates and the reasoning parsers read those);
// - thinking: {"type": ...}: thinking_mode = type (SGLang's MiniMax-M3 kwarg), and, unless the
//   effort decided it, thinking / enable_thinking = type != "disabled".
ApiExpected<chat::Json> AddThinkingKwargs(const json& body, chat::Json kwargs) {
  if (kwargs.is_null()) kwargs = chat::Json::object();
  auto set_default = [&kwargs](const char* key, const chat::Json& value) {
    if (!kwargs.contains(key)) kwargs[key] = value;
  };
  std::optional<std::string> effort;
  std::optional<bool> thinking;
  if (auto it = body.find("reasoning"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return InvalidRequest("reasoning must be an object.");
    for (const char* key : {"effort", "reasoning_effort"}) {
      if (auto e = it->find(key); !effort && e != it->end() && !e->is_null()) {
        if (!e->is_string()) return InvalidRequest("reasoning.effort must be a string.");
        effort = e->get<std::string>();
      }
    }
    for (const char* key : {"enabled", "enable"}) {
      if (auto e = it->find(key); e != it->end() && e->is_boolean()) {
        if (e->get<bool>()) thinking = true;
        break;
      }
    }
  }
  if (auto it = body.find("reasoning_effort"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) {
      return InvalidRequest("Invalid value for 'reasoning_effort': expected a string.");
    }
    effort = it->get<std::string>();
  }
  if (effort) {
    thinking = *effort != "none";
    set_default("reasoning_effort", *effort);
  }
  if (auto it = body.find("thinking"); it != body.end() && !it->is_null()) {
    auto type = it->is_object() ? it->find("type") : it->end();
    if (!it->is_object() || type == it->end() || !type->is_string()) {
      return InvalidRequest("thinking must be an object with a string 'type'.");
    }
    set_default("thinking_mode", type->get<std::string>());
    if (!thinking) thinking = type->get<std::string>() != "disabled";
  }
  if (thinking) {
    set_default("thinking", *thinking);
    set_default("enable_thinking", *thinking);
  }
  return kwargs;
}

// --reasoning-parser for this request: the parser that splits the thinking off (null when the
// request keeps it in content) and the token a constraint starts after.
struct ReasoningSetup {
  std::shared_ptr<const chat::ReasoningParser> parser;
  std::optional<int32_t> grammar_start_token;
};

ApiExpected<ReasoningSetup> SetUpReasoning(const ServerContext& ctx, FieldReader& reader,
                                           const json& body, const chat::Json& template_kwargs) {
  ReasoningSetup out;
  const bool separate = reader.Bool(body, "separate_reasoning").value_or(true);
  const bool stream_reasoning = reader.Bool(body, "stream_reasoning").value_or(true);
  if (!reader.ok()) return reader.error();
  auto name = ctx.args->GetOptionalString(args::key::kReasoningParser);
  if (!name) return out;
  chat::ReasoningParserOptions options;
  options.stream_reasoning = stream_reasoning;
  if (chat::ReasoningEnabledByRequest(*name, template_kwargs)) options.force_reasoning = true;
  auto force_nonempty = template_kwargs.find("force_nonempty_content");
  options.force_nonempty_content = force_nonempty != template_kwargs.end() &&
                                   force_nonempty->is_boolean() && force_nonempty->get<bool>();
  auto created = chat::ReasoningParser::Create(*name, options);
  if (!created.ok()) return BadRequest(created.status().message());
  std::shared_ptr<const chat::ReasoningParser> parser = std::move(created).value();
  // With thinking on, constraints apply to the answer only: the grammar starts after the
  // end-of-thinking token (when it is one token of the vocabulary; otherwise, and with thinking
  // off, it constrains the whole output).
  if (parser->force_reasoning() && ctx.tokenizer != nullptr &&
      !parser->format().think_end.empty()) {
    if (auto id = ctx.tokenizer->TokenToId(parser->format().think_end)) {
      out.grammar_start_token = static_cast<int32_t>(*id);
    }
  }
  if (separate) out.parser = std::move(parser);  // else the thinking stays in content
  return out;
}

}  // namespace

ApiExpected<ChatCall> ParseChatCall(ServerContext& ctx, const nlohmann::ordered_json& ordered) {
  const json body = ordered;
  FieldReader reader;
  OpenAiCommon common = ReadOpenAiCommon(reader, ctx, body, ordered);
  const bool logprobs = reader.Bool(body, "logprobs").value_or(false);
  const int64_t top_logprobs = reader.Int(body, "top_logprobs").value_or(0);
  const bool continue_final = reader.Bool(body, "continue_final_message").value_or(false);
  std::optional<int64_t> max_tokens = reader.Int(body, "max_completion_tokens");
  if (!max_tokens) max_tokens = reader.Int(body, "max_tokens");
  if (!reader.ok()) return reader.error();
  if (top_logprobs < 0 || top_logprobs > ctx.limits.max_top_logprobs) {
    return InvalidRequest(
        fmt::format("top_logprobs must be in [0, {}] (the server's --max-top-logprobs), got {}.",
                    ctx.limits.max_top_logprobs, top_logprobs));
  }
  if (!body.contains("messages") || !body["messages"].is_array()) {
    return InvalidRequest("Field 'messages' is required and must be a list.");
  }
  if (body["messages"].empty()) return BadRequest("Messages cannot be empty.");
  if (ctx.chat_template == nullptr) {
    return BadRequest(
        "This model has no chat template; pass --chat-template or use /v1/completions.");
  }

  auto tools = std::make_shared<ToolRequest>();
  RADIX_ASSIGN_OR_RETURN(*tools, ReadToolRequest(ordered));
  std::shared_ptr<const chat::ToolCallParser> tool_parser;
  if (tools->mode != ToolChoiceMode::kNone) {
    if (auto parser_name = ctx.args->GetOptionalString(args::key::kToolCallParser)) {
      auto created = chat::ToolCallParser::Create(*parser_name, tools->tools);
      if (!created.ok()) return BadRequest(created.status().message());
      tool_parser = std::move(created).value();
    }
  }
  chat::ChatRenderInput input;
  RADIX_ASSIGN_OR_RETURN(input.messages,
                         PrepareMessages(ordered["messages"], ctx.chat_template->content_format()));
  input.tools = tools->template_tools;
  input.continue_final_message = continue_final;
  input.add_generation_prompt = !continue_final;
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object()) {
      return InvalidRequest("chat_template_kwargs must be an object.");
    }
    input.template_kwargs = ordered["chat_template_kwargs"];
  }
  RADIX_ASSIGN_OR_RETURN(input.template_kwargs, AddThinkingKwargs(body, input.template_kwargs));
  auto prompt = ctx.chat_template->Render(input);
  if (!prompt.ok()) return BadRequest(prompt.status().message());
  // SGLang's input_ids: the prompt's ids, computed by the client; the template still ran above
  // (it checks the messages, and tools and reasoning are set up from them).
  std::optional<std::vector<int32_t>> input_ids;
  if (auto it = body.find("input_ids"); it != body.end() && !it->is_null()) {
    RADIX_ASSIGN_OR_RETURN(input_ids, Field(ReadTokenIds(*it, "input_ids", ctx.model.vocab_size)));
    if (input_ids->empty()) return InvalidRequest("input_ids must not be empty.");
  }
  ReasoningSetup reasoning;
  RADIX_ASSIGN_OR_RETURN(reasoning, SetUpReasoning(ctx, reader, body, input.template_kwargs));

  json sampling = std::move(common.sampling);
  // The request's own constraint (sampling field or response_format), if any: a tool-call
  // constraint cannot be combined with it.
  const auto own_constraint = [&sampling]() -> const char* {
    for (const char* field : {"json_schema", "regex", "ebnf", "structural_tag"}) {
      if (sampling.contains(field)) return field;
    }
    return nullptr;
  };
  if (tools->constrained()) {
    // SGLang: required / named tool choice is a JSON-schema constraint on a call array.
    if (const char* other = own_constraint()) {
      return BadRequest(
          fmt::format("tool_choice \"required\" or a named function cannot be combined with {} (or "
                      "response_format): the tool call is the constraint.",
                      other));
    }
    RADIX_ASSIGN_OR_RETURN(sampling["json_schema"], ToolCallSchema(*tools));
  }
  std::optional<std::string> strict_tag;
  RADIX_ASSIGN_OR_RETURN(strict_tag, StrictCallsTag(*tools, tool_parser.get()));
  if (strict_tag) {
    if (const char* other = own_constraint()) {
      return BadRequest(
          fmt::format("Strict tools under tool_choice \"auto\" cannot be combined with {} (or "
                      "response_format): the tool-call format is the constraint.",
                      other));
    }
    sampling["structural_tag"] = std::move(*strict_tag);
  }
  // As SGLang: the text keeps its special tokens where a parser reads them -- gpt-oss's harmony
  // markup, and tool-call markup whenever a tool may be called.
  if (ctx.model.model_type == "gpt_oss" || tools->mode != ToolChoiceMode::kNone) {
    sampling["skip_special_tokens"] = false;
  }
  sampling["max_new_tokens"] = max_tokens ? json(*max_tokens) : json(nullptr);
  sampling["n"] = common.n;
  const std::string base_rid = common.rid ? *common.rid : NewRid(ctx);
  ServingPlan plan;
  plan.stream = common.stream;
  plan.group = static_cast<size_t>(common.n);
  for (size_t i = 0; i < plan.group; ++i) {
    BuildOptions options{
        .rid = plan.group > 1 ? fmt::format("{}_{}", base_rid, i) : base_rid,
        .stream = common.stream,
        .priority = common.priority,
        .extra_key = common.cache_namespace,
        .lora = common.lora,
        .return_logprob = logprobs,
        .logprob_start_len = -1,
        .top_logprobs_num = static_cast<int32_t>(logprobs ? top_logprobs : 0),
        .token_ids_logprob = {},
        .return_text_in_logprobs = false,
        .return_hidden_states = common.return_hidden_states,
        .add_special_tokens = false,
        .apply_model_defaults = ctx.args->GetString(args::key::kSamplingDefaults) == "model",
        .float_fields_are_floats = true};
    BuiltRequest built =
        input_ids ? BuildGenerateRequest(ctx, {std::nullopt, *input_ids}, sampling, options)
                  : BuildGenerateRequest(ctx, {*prompt, std::nullopt}, sampling, options);
    if (built.error) return *built.error;
    built.request->sampling.n = 1;
    built.request->routed_dp_rank = common.routed_dp_rank;
    if (built.request->sampling.HasGrammar()) {
      built.request->grammar_start_token = reasoning.grammar_start_token;
    }
    plan.requests.push_back(std::move(*built.request));
  }
  const size_t choices = plan.requests.size();
  ChatCall call{
      .plan = std::move(plan),
      .output = std::make_unique<ChatOutput>(tools, tool_parser, reasoning.parser, choices),
      .model = common.model,
      .logprobs = logprobs,
      .include_usage = common.include_usage,
      .hidden_states = common.return_hidden_states,
      .return_token_ids = common.return_token_ids,
      .return_cached_tokens_details = common.return_cached_tokens_details};
  return call;
}

// SGLang's response extras of /v1/chat/completions into `format` (the per-choice ones refuse a
// streamed call, as SGLang does).
ApiExpected<bool> ReadChatExtras(const json& body, const ChatCall& call, const ServingPlan& plan,
                                 ChatFormatter::Options& format) {
  FieldReader reader;
  const bool prompt_token_ids = reader.Bool(body, "return_prompt_token_ids").value_or(false);
  format.prompt_token_ids = prompt_token_ids || call.return_token_ids;
  format.response_token_ids = call.return_token_ids;
  format.meta_info = reader.Bool(body, "return_meta_info").value_or(false);
  format.sglext_cached_tokens_details = call.return_cached_tokens_details;
  format.sglext_input_ids = reader.Bool(body, "return_input_ids_in_sglext").value_or(false);
  format.sglext_output_ids = reader.Bool(body, "return_output_ids_in_sglext").value_or(false);
  if (!reader.ok()) return reader.error();
  if (plan.stream) {
    for (auto [key, asked] : {std::pair{"return_prompt_token_ids", prompt_token_ids},
                              std::pair{"return_token_ids", call.return_token_ids},
                              std::pair{"return_meta_info", format.meta_info}}) {
      if (asked) {
        return BadRequest(fmt::format(
            "{} is not supported with streaming. Please set stream=false when using {}=true.", key,
            key));
      }
    }
  }
  format.prompt_ids = plan.requests[0].input_ids;
  format.meta_shape.return_logprob = plan.requests[0].return_logprob;
  format.meta_shape.top_logprobs_num = plan.requests[0].top_logprobs_num;
  format.meta_shape.return_hidden_states = plan.requests[0].return_hidden_states;
  return true;
}

ApiExpected<ServingPlan> ParseChatCompletions(ServerContext& ctx, std::string_view body_text) {
  // Templates see the client's key order (tools | tojson), so the body is read order-preserving.
  nlohmann::ordered_json ordered;
  RADIX_ASSIGN_OR_RETURN(ordered, ParseOrderedJsonObjectBody(body_text));
  const json body = ordered;
  if (auto error = CheckOpenAiFields(body, Route::kChat)) return *error;
  ChatCall call;
  RADIX_ASSIGN_OR_RETURN(call, ParseChatCall(ctx, ordered));
  ServingPlan plan = std::move(call.plan);
  ChatFormatter::Options format;
  format.id = plan.requests[0].rid;
  format.created = NowSeconds();
  format.model = call.model;
  format.logprobs = call.logprobs;
  format.include_usage = call.include_usage;
  format.hidden_states = call.hidden_states;
  format.group = plan.group;
  if (ApiExpected<bool> extras = ReadChatExtras(body, call, plan, format); !extras.ok()) {
    return extras.status();
  }
  plan.formatter = std::make_shared<ChatFormatter>(std::move(format), std::move(call.output),
                                                   plan.requests.size());
  if (ApiExpected<bool> applied = ApplyBootstrap(ctx, body, plan); !applied.ok()) {
    return applied.status();
  }
  return plan;
}

void HandleChatCompletions(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer) {
  Serve(ctx, std::move(writer), ErrorStyle::kOpenAi, ParseChatCompletions(ctx, body));
}

}  // namespace radixserve::api

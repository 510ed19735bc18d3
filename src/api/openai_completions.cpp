#include <cmath>

#include <fmt/format.h>

#include "api/disagg_fields.h"
#include "api/json_body.h"
#include "api/json_fields.h"
#include "api/openai_api.h"
#include "api/openai_common.h"
#include "api/openai_fields.h"
#include "api/request_builder.h"
#include "api/serving.h"

namespace radixserve::api {
namespace {

using namespace openai;

// OpenAI's legacy logprobs object for output tokens [from, end) (and the echoed prompt first).
json CompletionLogprobs(const ServerContext& ctx, const ChoiceState& choice, size_t from,
                        bool with_prompt) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  auto add = [&](const engine::TokenLogprobInfo& info) {
    tokens.push_back(TokenText(ctx, info.token_id));
    token_logprobs.push_back(std::isnan(info.logprob) ? json(nullptr) : json(info.logprob));
    if (info.top.empty()) {
      top.push_back(nullptr);
    } else {
      json alternatives = json::object();
      for (const auto& [id, lp] : info.top) alternatives[TokenText(ctx, id)] = lp;
      top.push_back(std::move(alternatives));
    }
    offsets.push_back(-1);
  };
  if (with_prompt) {
    for (const auto& info : choice.input_logprobs) add(info);
  }
  for (size_t i = from; i < choice.output_logprobs.size(); ++i) add(choice.output_logprobs[i]);
  return {{"text_offset", offsets},
          {"token_logprobs", token_logprobs},
          {"tokens", tokens},
          {"top_logprobs", top}};
}

// The prompts of `prompt`: str | [str] | [int] | [[int]].
ApiExpected<std::vector<PromptInput>> ReadCompletionPrompts(const ServerContext& ctx,
                                                            const json& body) {
  static const char* const kShape =
      "prompt must be a string, a list of strings, a list of token ids or a list of such lists.";
  std::vector<PromptInput> prompts;
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return prompts;
  const json& prompt = *it;
  auto add_ids = [&](const json& ids) -> std::optional<ApiError> {
    auto read = ReadTokenIds(ids, "prompt", ctx.model.vocab_size);
    if (!read.ok()) return InvalidRequest(read.status().message());
    prompts.push_back({std::nullopt, std::move(read).value()});
    return std::nullopt;
  };
  if (prompt.is_string()) {
    prompts.push_back({prompt.get<std::string>(), std::nullopt});
  } else if (prompt.is_array() && !prompt.empty() && !prompt[0].is_string() &&
             !prompt[0].is_array()) {
    if (auto error = add_ids(prompt)) return *error;
  } else if (prompt.is_array()) {
    for (const auto& item : prompt) {
      if (item.is_string()) {
        prompts.push_back({item.get<std::string>(), std::nullopt});
      } else if (item.is_array()) {
        if (auto error = add_ids(item)) return *error;
      } else {
        return InvalidRequest(kShape);
      }
    }
  } else {
    return InvalidRequest(kShape);
  }
  return prompts;
}

// /v1/completions answers: text_completion objects, streamed as deltas of each choice's text.
class CompletionsFormatter final : public ResponseFormatter {
 public:
  struct Options {
    std::string id;
    int64_t created = 0;
    std::string model;
    std::vector<std::string> echo_text;  // per choice: the prompt text to echo ("" without echo)
    bool echo = false;
    bool logprobs = false;
    bool include_usage = false;
    bool hidden_states = false;
    // return_token_ids: each choice's prompt ids (per choice) and output ids.
    bool token_ids = false;
    std::vector<std::vector<int32_t>> prompt_ids;
    bool cached_tokens_details = false;  // sglext.cached_tokens_details
    size_t group = 1;
  };

  explicit CompletionsFormatter(Options options)
      : o_(std::move(options)), cursors_(o_.echo_text.size()) {}

  void StreamEvent(const ServerContext& ctx, const std::vector<ChoiceState>& choices, size_t index,
                   const engine::RequestEvent& event, const Emit& emit) override {
    const ChoiceState& choice = choices[index];
    if (choice.finish && choice.finish->kind == engine::FinishKind::kAbort &&
        choice.finish->status_code >= 400) {
      return;  // answered once everything has finished
    }
    Cursor& cursor = cursors_[index];
    std::string delta;
    const bool first = !cursor.started;
    if (first) {
      cursor.started = true;
      delta = o_.echo_text[index];
    }
    delta += choice.text.substr(cursor.text_sent);
    cursor.text_sent = choice.text.size();
    if (delta.empty() && !event.finished) return;
    if (event.finished && o_.hidden_states) {
      // SGLang sends the hidden state in a chunk of its own before the finishing one.
      emit(Chunk({{"index", index},
                  {"text", ""},
                  {"logprobs", nullptr},
                  {"hidden_states", LastHiddenState(choice)},
                  {"finish_reason", nullptr},
                  {"matched_stop", nullptr}}));
    }
    json lp = nullptr;
    if (o_.logprobs) {
      lp = CompletionLogprobs(ctx, choice, cursor.logprobs_sent, first && o_.echo);
      cursor.logprobs_sent = choice.output_logprobs.size();
    }
    json chunk = {
        {"index", index},
        {"text", std::move(delta)},
        {"logprobs", std::move(lp)},
        {"finish_reason", event.finished ? json(FinishReasonName(choice)) : json(nullptr)},
        {"matched_stop", event.finished ? MatchedStop(choice) : json(nullptr)}};
    if (o_.token_ids) {
      chunk["token_ids"] = std::vector<int32_t>(
          choice.output_ids.begin() + static_cast<std::ptrdiff_t>(cursor.ids_sent),
          choice.output_ids.end());
      cursor.ids_sent = choice.output_ids.size();
      if (first) chunk["prompt_token_ids"] = o_.prompt_ids[index];
    }
    emit(Chunk(std::move(chunk)));
  }

  void StreamEnd(const ServerContext& ctx, const std::vector<ChoiceState>& choices,
                 const Emit& emit) override {
    if (auto failed = FailedChoice(choices)) {
      emit(StreamErrorBody(ErrorStyle::kOpenAi, *failed));
      return;
    }
    if (json ext = Sglext(choices); !ext.empty()) {
      emit(SglextChunk(o_.id, "text_completion", o_.created, o_.model, std::move(ext)));
    }
    if (o_.include_usage) {
      emit(UsageChunk(o_.id, "text_completion", o_.created, o_.model,
                      Usage(ctx, choices, o_.group)));
    }
  }

  FormattedResponse Complete(const ServerContext& ctx,
                             const std::vector<ChoiceState>& choices) override {
    if (auto failed = FailedChoice(choices)) return {failed->status, failed->OpenAiBody()};
    json out_choices = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      json choice = {{"index", i},
                     {"text", o_.echo_text[i] + choices[i].text},
                     {"logprobs", o_.logprobs ? CompletionLogprobs(ctx, choices[i], 0, o_.echo)
                                              : json(nullptr)},
                     {"finish_reason", FinishReasonName(choices[i])},
                     {"matched_stop", MatchedStop(choices[i])}};
      if (o_.hidden_states) choice["hidden_states"] = LastHiddenState(choices[i]);
      if (o_.token_ids) {
        choice["token_ids"] = choices[i].output_ids;
        choice["prompt_token_ids"] = o_.prompt_ids[i];
      }
      out_choices.push_back(std::move(choice));
    }
    json out = Envelope(ctx, o_.id, "text_completion", o_.created, o_.model, std::move(out_choices),
                        Usage(ctx, choices, o_.group));
    if (json ext = Sglext(choices); !ext.empty()) out["sglext"] = std::move(ext);
    return {200, std::move(out)};
  }

 private:
  // What has been streamed of one choice.
  struct Cursor {
    bool started = false;  // the first chunk (with the echoed prompt) went out
    size_t text_sent = 0;
    size_t ids_sent = 0;
    size_t logprobs_sent = 0;
  };

  // SGLang's response-level extension object; empty when the request asked for none of it.
  json Sglext(const std::vector<ChoiceState>& choices) const {
    json ext = json::object();
    if (o_.cached_tokens_details && !choices.empty()) {
      ext["cached_tokens_details"] = CachedTokensDetails(choices[0]);
    }
    return ext;
  }

  json Chunk(json choice) const {
    return {{"id", o_.id},
            {"object", "text_completion"},
            {"created", o_.created},
            {"model", o_.model},
            {"choices", json::array({std::move(choice)})}};
  }

  Options o_;
  std::vector<Cursor> cursors_;
};

}  // namespace

ApiExpected<ServingPlan> ParseCompletions(ServerContext& ctx, std::string_view body_text) {
  nlohmann::ordered_json ordered;
  RADIX_ASSIGN_OR_RETURN(ordered, ParseOrderedJsonObjectBody(body_text));
  const json body = ordered;
  if (auto error = CheckOpenAiFields(body, Route::kCompletions)) return *error;
  FieldReader reader;
  OpenAiCommon common = ReadOpenAiCommon(reader, ctx, body, ordered);
  const bool echo = reader.Bool(body, "echo").value_or(false);
  const std::optional<int64_t> logprobs = reader.Int(body, "logprobs");
  const std::string suffix = reader.String(body, "suffix").value_or("");
  const int64_t best_of = ReadN(reader, ctx, body, "best_of");
  const int64_t max_tokens = reader.Int(body, "max_tokens").value_or(16);
  if (!reader.ok()) return reader.error();
  if (!suffix.empty() && ctx.completion_template == nullptr) {
    return BadRequest(
        "suffix needs a fill-in-the-middle template: start the server with "
        "--completion-template.");
  }
  if (body.contains("best_of") && !body["best_of"].is_null() && best_of != common.n) {
    return BadRequest("best_of is not supported: use n to get several choices.");
  }
  if (logprobs && (*logprobs < 0 || *logprobs > ctx.limits.max_top_logprobs)) {
    return InvalidRequest(
        fmt::format("logprobs must be in [0, {}] (the server's --max-top-logprobs), got {}.",
                    ctx.limits.max_top_logprobs, *logprobs));
  }
  if (max_tokens <= 0) return BadRequest("max_tokens must be positive");
  RADIX_ASSIGN_OR_RETURN(auto labels, Field(ReadBodyLabels(body)));

  std::vector<PromptInput> prompts;
  RADIX_ASSIGN_OR_RETURN(prompts, ReadCompletionPrompts(ctx, body));
  if (prompts.empty() || (prompts.size() == 1 && prompts[0].text && prompts[0].text->empty())) {
    return BadRequest("Prompt cannot be empty");
  }
  if (!suffix.empty()) {
    for (PromptInput& item : prompts) {
      if (!item.text) return BadRequest("suffix needs a text prompt, not token ids.");
      item.text = ctx.completion_template->Apply(*item.text, suffix);
    }
  }
  const int64_t n = common.n;
  if (static_cast<int64_t>(prompts.size()) > ctx.limits.max_requests_per_call / n) {
    return InvalidRequest(fmt::format(
        "The request asks for more than {} completions (prompts x n); the server's limit is "
        "--max-requests-per-call.",
        ctx.limits.max_requests_per_call));
  }

  json sampling = std::move(common.sampling);
  sampling["max_new_tokens"] = max_tokens;
  sampling["n"] = n;
  const std::string base_rid = common.rid ? *common.rid : NewRid(ctx);
  ServingPlan plan;
  plan.stream = common.stream;
  plan.group = static_cast<size_t>(n);
  CompletionsFormatter::Options format{.id = base_rid,
                                       .created = NowSeconds(),
                                       .model = common.model,
                                       .echo_text = {},
                                       .echo = echo,
                                       .logprobs = logprobs.has_value(),
                                       .include_usage = common.include_usage,
                                       .hidden_states = common.return_hidden_states,
                                       .token_ids = common.return_token_ids,
                                       .prompt_ids = {},
                                       .cached_tokens_details = common.return_cached_tokens_details,
                                       .group = plan.group};
  const size_t total = prompts.size() * plan.group;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (size_t i = 0; i < plan.group; ++i) {
      const size_t index = p * plan.group + i;
      BuildOptions options{.rid = total > 1 ? fmt::format("{}_{}", base_rid, index) : base_rid,
                           .stream = common.stream,
                           .priority = common.priority,
                           .extra_key = common.cache_namespace,
                           .lora = common.lora,
                           .return_logprob = logprobs.has_value(),
                           .logprob_start_len = (echo && logprobs) ? 0 : -1,
                           .top_logprobs_num = static_cast<int32_t>(logprobs.value_or(0)),
                           .token_ids_logprob = {},
                           .return_text_in_logprobs = false,
                           .return_hidden_states = common.return_hidden_states,
                           .add_special_tokens = true,
                           .apply_model_defaults = false,
                           .float_fields_are_floats = true};
      BuiltRequest built = BuildGenerateRequest(ctx, prompts[p], sampling, options);
      if (built.error) return *built.error;
      built.request->sampling.n = 1;
      built.request->routed_dp_rank = common.routed_dp_rank;
      if (common.return_token_ids) format.prompt_ids.push_back(built.request->input_ids);
      std::string text;
      if (echo) {
        text = prompts[p].text ? *prompts[p].text
                               : (ctx.tokenizer ? ctx.tokenizer->Decode(*prompts[p].ids) : "");
      }
      format.echo_text.push_back(std::move(text));
      plan.requests.push_back(std::move(*built.request));
    }
  }
  format.id = plan.requests[0].rid;
  plan.formatter = std::make_shared<CompletionsFormatter>(std::move(format));
  plan.metric_labels = std::move(labels);
  if (ApiExpected<bool> applied = ApplyBootstrap(ctx, body, plan); !applied.ok()) {
    return applied.status();
  }
  return plan;
}

void HandleCompletions(ServerContext& ctx, const std::string& body, ResponseWriterPtr writer) {
  Serve(ctx, std::move(writer), ErrorStyle::kOpenAi, ParseCompletions(ctx, body));
}

}  // namespace radixserve::api

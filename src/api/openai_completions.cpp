#include <cmath>

#include <fmt/format.h>

#include "api/openai_api.h"
#include "api/json_body.h"
#include "api/json_fields.h"
#include "api/openai_common.h"
#include "api/request_builder.h"

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

}  // namespace

void HandleCompletions(ServerContext& ctx, const std::string& body_text, ResponseWriterPtr writer) {
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
  std::vector<std::string> echo_text;  // per request: the prompt text to echo
  std::string model;
  bool stream = false, include_usage = false, echo = false;
  std::optional<int64_t> logprobs;
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
    echo = OptBool(body, "echo").value_or(false);
    logprobs = OptInt(body, "logprobs");
    n = RequireN(ctx, body, "n");
    std::string suffix = OptString(body, "suffix").value_or("");
    if (!suffix.empty() && ctx.completion_template == nullptr) {
      SendError(*writer, BadRequest("suffix needs a fill-in-the-middle template: start the "
                                    "server with --completion-template."));
      return;
    }
    if (body.contains("best_of") && !body["best_of"].is_null() &&
        RequireN(ctx, body, "best_of") != n) {
      SendError(*writer, BadRequest("best_of is not supported: use n to get several choices."));
      return;
    }
    if (logprobs && (*logprobs < 0 || *logprobs > ctx.limits.max_top_logprobs)) {
      throw ValidationError(fmt::format(
          "logprobs must be in [0, {}] (the server's --max-top-logprobs), got {}.",
          ctx.limits.max_top_logprobs, *logprobs));
    }
    int64_t max_tokens = OptInt(body, "max_tokens").value_or(16);
    if (max_tokens <= 0) {
      SendError(*writer, BadRequest("max_tokens must be positive"));
      return;
    }

    // prompt: str | [str] | [int] | [[int]]
    std::vector<PromptInput> prompts;
    static const json kNoPrompt;
    const json& prompt = body.contains("prompt") ? body["prompt"] : kNoPrompt;
    auto token_ids = [&](const json& ids) {
      auto read = ReadTokenIds(ids, "prompt", ctx.model.vocab_size);
      if (!read.ok()) throw ValidationError(read.status().message());
      return std::move(read).value();
    };
    if (prompt.is_string()) {
      prompts.push_back({prompt.get<std::string>(), std::nullopt});
    } else if (prompt.is_array() && !prompt.empty() && !prompt[0].is_string() &&
               !prompt[0].is_array()) {
      prompts.push_back({std::nullopt, token_ids(prompt)});
    } else if (prompt.is_array()) {
      for (const auto& item : prompt) {
        if (item.is_string()) {
          prompts.push_back({item.get<std::string>(), std::nullopt});
        } else if (item.is_array()) {
          prompts.push_back({std::nullopt, token_ids(item)});
        } else {
          throw ValidationError(
              "prompt must be a string, a list of strings, a list of token "
              "ids or a list of such lists.");
        }
      }
    } else if (!prompt.is_null()) {
      throw ValidationError(
          "prompt must be a string, a list of strings, a list of token ids "
          "or a list of such lists.");
    }
    if (prompts.empty() || (prompts.size() == 1 && prompts[0].text && prompts[0].text->empty())) {
      SendError(*writer, BadRequest("Prompt cannot be empty"));
      return;
    }
    if (!suffix.empty()) {
      for (PromptInput& item : prompts) {
        if (!item.text) {
          SendError(*writer, BadRequest("suffix needs a text prompt, not token ids."));
          return;
        }
        item.text = ctx.completion_template->Apply(*item.text, suffix);
      }
    }

    if (static_cast<int64_t>(prompts.size()) > ctx.limits.max_requests_per_call / n) {
      throw ValidationError(fmt::format(
          "The request asks for more than {} completions (prompts x n); the server's limit is "
          "--max-requests-per-call.",
          ctx.limits.max_requests_per_call));
    }
    const nlohmann::ordered_json ordered_body = ParseOrderedJsonBody(body_text).value();
    json sampling = SamplingFromOpenAi(body, ordered_body);
    sampling["max_new_tokens"] = max_tokens;
    sampling["n"] = n;
    std::string base_rid = OptString(body, "rid").value_or(NewRid(ctx));
    for (size_t p = 0; p < prompts.size(); ++p) {
      for (int64_t i = 0; i < std::max<int64_t>(n, 1); ++i) {
        size_t index = p * static_cast<size_t>(std::max<int64_t>(n, 1)) + static_cast<size_t>(i);
        BuildOptions options{.rid = prompts.size() * static_cast<size_t>(n) > 1
                                        ? fmt::format("{}_{}", base_rid, index)
                                        : base_rid,
                             .stream = stream,
                             .priority = OptInt(body, "priority"),
                             .extra_key = CacheNamespace(body),
                             .return_logprob = logprobs.has_value(),
                             .logprob_start_len = (echo && logprobs) ? 0 : -1,
                             .top_logprobs_num = static_cast<int32_t>(logprobs.value_or(0)),
                             .token_ids_logprob = {},
                             .return_text_in_logprobs = false,
                             .add_special_tokens = true,
                             .apply_model_defaults = false,
                             .float_fields_are_floats = true};
        BuiltRequest built = BuildGenerateRequest(ctx, prompts[p], sampling, options);
        if (built.error) {
          SendError(*writer, *built.error);
          return;
        }
        built.request->sampling.n = 1;
        std::string text;
        if (echo) {
          text = prompts[p].text ? *prompts[p].text
                                 : (ctx.tokenizer ? ctx.tokenizer->Decode(*prompts[p].ids) : "");
        }
        echo_text.push_back(std::move(text));
        requests.push_back(std::move(*built.request));
      }
    }
  } catch (const ValidationError& e) {
    SendValidationError(*writer, e.what());
    return;
  } catch (const RequestError& e) {
    SendError(*writer, BadRequest(e.what()));
    return;
  } catch (const json::exception&) {
    SendValidationError(*writer, "prompt token ids must be integers.");
    return;
  }

  const std::string id = requests[0].rid;
  const int64_t created = NowSeconds();
  const size_t group = static_cast<size_t>(std::max<int64_t>(n, 1));
  const bool want_logprobs = logprobs.has_value();

  auto chunk = [id, created, model](json choice) {
    return json{{"id", id},
                {"object", "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", json::array({std::move(choice)})}};
  };
  auto on_event = [chunk, stream, echo_text, want_logprobs, echo](
                      CallTracker& call, size_t index, const engine::RequestEvent& event) {
    if (!stream) return;
    ChoiceState& choice = call.choices()[index];
    if (choice.finish && choice.finish->kind == engine::FinishKind::kAbort &&
        choice.finish->status_code >= 400) {
      return;
    }
    std::string delta;
    bool first = choice.ids_sent == 0;
    if (first) {
      choice.ids_sent = 1;
      delta = echo_text[index];
    }
    delta += choice.text.substr(choice.text_sent);
    choice.text_sent = choice.text.size();
    if (delta.empty() && !event.finished) return;
    json lp = nullptr;
    if (want_logprobs) {
      lp = CompletionLogprobs(call.context(), choice, choice.logprobs_sent, first && echo);
      choice.logprobs_sent = choice.output_logprobs.size();
    }
    call.writer().SendEvent(ToJsonText(
        chunk({{"index", index},
               {"text", delta},
               {"logprobs", lp},
               {"finish_reason", event.finished ? json(FinishReasonName(choice)) : json(nullptr)},
               {"matched_stop", event.finished ? MatchedStop(choice) : json(nullptr)}})));
  };
  auto on_done = [id, created, model, stream, include_usage, group, echo_text, want_logprobs,
                  echo](CallTracker& call) {
    if (AnswerFailedChoice(call, stream)) return;
    auto& choices = call.choices();
    json usage = Usage(call.context(), choices, group);
    if (stream) {
      if (include_usage) {
        call.writer().SendEvent(
            ToJsonText(UsageChunk(id, "text_completion", created, model, usage)));
      }
      call.writer().SendEvent("[DONE]");
      call.writer().EndStream();
      return;
    }
    json out_choices = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      out_choices.push_back(
          {{"index", i},
           {"text", echo_text[i] + choices[i].text},
           {"logprobs", want_logprobs ? CompletionLogprobs(call.context(), choices[i], 0, echo)
                                      : json(nullptr)},
           {"finish_reason", FinishReasonName(choices[i])},
           {"matched_stop", MatchedStop(choices[i])}});
    }
    call.writer().Send(
        200, "application/json",
        ToJsonText(json{{"id", id},
                        {"object", "text_completion"},
                        {"created", created},
                        {"model", model},
                        {"choices", out_choices},
                        {"usage", usage},
                        {"metadata", {{"weight_version", call.context().weight_version}}}}));
  };
  CallTracker::Start(ctx, writer, std::move(requests), on_event, on_done,
                     RejectionAnswer(writer), group, stream);
}

}  // namespace radixserve::api

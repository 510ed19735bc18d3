#include "api/serving.h"

#include <utility>

#include <fmt/format.h>

namespace radixserve::api {

void Serve(ServerContext& ctx, ResponseWriterPtr writer, ErrorStyle errors,
           ApiExpected<ServingPlan> plan) {
  if (!plan.ok()) {
    const ApiError& error = plan.status();
    writer->Send(error.status, "application/json", ToJsonText(ErrorBody(errors, error)));
    return;
  }
  for (auto& [label, value] : plan->metric_labels) writer->metric_labels[label] = value;
  writer->log_metrics = writer->log_metrics && plan->log_metrics;
  writer->no_logs = writer->no_logs || plan->no_logs;
  std::shared_ptr<ResponseFormatter> formatter = plan->formatter;
  const bool stream = plan->stream;
  auto on_end = std::make_shared<std::function<void(const std::vector<ChoiceState>*)>>(
      std::move(plan->on_end));
  // SGLang's and OpenAI's streams end with "data: [DONE]", RTP-LLM's with "data:[done]" (not
  // after an error); LightLLM's and TGI's just end.
  const bool done_marker = errors == ErrorStyle::kOpenAi || errors == ErrorStyle::kNative;
  const char* end_marker = !plan->end_marker               ? nullptr
                           : done_marker                   ? "[DONE]"
                           : errors == ErrorStyle::kRtpLlm ? "[done]"
                                                           : nullptr;

  const bool named = plan->named_events;
  const auto send = [named](ResponseWriter& writer, const nlohmann::json& data) {
    if (named && data.is_object() && data.contains("type") && data["type"].is_string()) {
      writer.SendNamedEvent(data["type"].get<std::string>(), ToJsonText(data));
    } else {
      writer.SendEvent(ToJsonText(data));
    }
  };
  auto on_event = [formatter, stream, send](CallTracker& call, size_t index,
                                            const engine::RequestEvent& event) {
    if (!stream) return;
    ResponseWriter& writer = call.writer();
    formatter->StreamEvent(call.context(), call.choices(), index, event,
                           [&writer, &send](const nlohmann::json& data) { send(writer, data); });
  };
  auto on_done = [formatter, stream, end_marker, on_end, send](CallTracker& call) {
    if (*on_end) (*on_end)(&call.choices());
    ResponseWriter& writer = call.writer();
    if (stream) {
      formatter->StreamEnd(call.context(), call.choices(),
                           [&writer, &send](const nlohmann::json& data) { send(writer, data); });
      if (end_marker != nullptr) writer.SendEvent(end_marker);
      writer.EndStream();
      return;
    }
    FormattedResponse response = formatter->Complete(call.context(), call.choices());
    writer.Send(response.status, "application/json", ToJsonText(response.body));
  };
  auto on_rejected = [writer, errors, done_marker, on_end](const ApiError& error,
                                                           bool stream_started) {
    if (*on_end) (*on_end)(nullptr);
    if (stream_started) {
      writer->SendEvent(ToJsonText(StreamErrorBody(errors, error)));
      if (done_marker) writer->SendEvent("[DONE]");
      writer->EndStream();
      return;
    }
    writer->Send(error.status, "application/json", ToJsonText(ErrorBody(errors, error)));
  };
  // Starts the call; under RTP-LLM's --concurrency-limit it holds `slot` until it is answered.
  struct Call {
    std::vector<engine::GenerateRequest> requests;
    CallTracker::OnEvent on_event;
    CallTracker::OnDone on_done;
    CallTracker::OnRejected on_rejected;
  };
  auto call = std::make_shared<Call>(Call{std::move(plan->requests), std::move(on_event),
                                          std::move(on_done), std::move(on_rejected)});
  auto start = [&ctx, writer, call, group = plan->group,
                stream](std::shared_ptr<ConcurrencyLimit::Slot> slot) {
    CallTracker::OnDone done = std::move(call->on_done);
    CallTracker::OnRejected rejected = std::move(call->on_rejected);
    if (slot != nullptr) {
      done = [slot, done = std::move(done)](CallTracker& tracker) {
        done(tracker);
        slot->Release();
      };
      rejected = [slot, rejected = std::move(rejected)](const ApiError& error,
                                                        bool stream_started) {
        rejected(error, stream_started);
        slot->Release();
      };
    }
    CallTracker::Start(ctx, writer, std::move(call->requests), std::move(call->on_event),
                       std::move(done), std::move(rejected), group, stream);
  };
  if (ctx.concurrency == nullptr) return start(nullptr);
  // A waiting call starts on its connection's strand, never inside the call that freed its slot.
  const bool admitted =
      ctx.concurrency->Enter([writer, start](std::shared_ptr<ConcurrencyLimit::Slot> slot) {
        writer->Post([start, slot] { start(slot); });
      });
  if (!admitted) {
    ApiError error{503,
                   fmt::format("The server's --concurrency-limit of {} calls in flight is reached; "
                               "try again later.",
                               ctx.concurrency->limit()),
                   "CONCURRENCY_LIMIT_ERROR",
                   {}};
    writer->Send(error.status, "application/json", ToJsonText(ErrorBody(errors, error)));
  }
}

std::optional<ApiError> FailedChoice(const std::vector<ChoiceState>& choices) {
  for (const ChoiceState& choice : choices) {
    if (!choice.finish || choice.finish->kind != engine::FinishKind::kAbort ||
        choice.finish->status_code < 400) {
      continue;
    }
    const int status = choice.finish->status_code;
    return ApiError{status, choice.finish->message, status == 503 ? "503" : "BadRequestError", {}};
  }
  return std::nullopt;
}

void SendResult(ResponseWriter& writer, const ApiExpected<nlohmann::json>& result,
                ErrorStyle errors) {
  if (result.ok()) {
    writer.Send(200, "application/json", ToJsonText(*result));
  } else {
    writer.Send(result.status().status, "application/json",
                ToJsonText(ErrorBody(errors, result.status())));
  }
}

}  // namespace radixserve::api

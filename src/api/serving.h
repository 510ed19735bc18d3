// The one serving path of the generation routes (/generate, /v1/completions,
// /v1/chat/completions and the LightLLM / RTP-LLM request forms), in the manner of SGLang's
// OpenAIServingBase.handle_request and llama.cpp's handle_completions_impl:
//
//   parse (the route's parser: body text -> ServingPlan, or the ApiError to answer; no exceptions)
//     -> Serve: submit the plan's engine requests through a CallTracker
//     -> the plan's ResponseFormatter turns the accumulated choices into stream chunks or the
//        final body, on the connection's I/O strand (never the engine thread).
//
// Error answers are shaped by the route's ErrorStyle (api_error.h), for a refused parse, a call the
// engine refuses, and a choice that fails after admission alike.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/call_tracker.h"
#include "api/concurrency_limit.h"
#include "api/response_writer.h"
#include "api/server_context.h"
#include "engine/request.h"
#include "engine/request_event.h"

namespace radixserve::api {

// A complete (non-streamed) answer.
struct FormattedResponse {
  int status = 200;
  nlohmann::json body;
};

// Formats one call's answer from its choices. One instance per call; its methods run one at a
// time (under the call's lock), so it may keep per-choice cursors of what it has sent.
class ResponseFormatter {
 public:
  // Writes one Server-Sent Event whose data is the JSON text of the value.
  using Emit = std::function<void(const nlohmann::json&)>;

  virtual ~ResponseFormatter() = default;

  // Streaming calls: `event` was just folded into choices[index]; emit its chunks, if any.
  virtual void StreamEvent(const ServerContext& ctx, const std::vector<ChoiceState>& choices,
                           size_t index, const engine::RequestEvent& event, const Emit& emit) = 0;
  // Streaming calls: every choice has finished; emit the closing chunks (Serve then sends the
  // route's end marker and closes the stream).
  virtual void StreamEnd(const ServerContext& ctx, const std::vector<ChoiceState>& choices,
                         const Emit& emit) = 0;
  // Non-streaming calls: the answer once every choice has finished.
  virtual FormattedResponse Complete(const ServerContext& ctx,
                                     const std::vector<ChoiceState>& choices) = 0;
};

// What a route's parser makes of a request.
struct ServingPlan {
  std::vector<engine::GenerateRequest> requests;
  // The requests come in groups of `group` parallel samples of one prompt (n); see
  // CallTracker::Start.
  size_t group = 1;
  bool stream = false;
  // Whether a stream that ends normally sends its style's end marker ("[DONE]" for kOpenAi and
  // kNative, "[done]" for kRtpLlm, none for the others). RTP-LLM leaves it out when the client
  // asked with "stream": true.
  bool end_marker = true;
  // Each streamed event also gets an "event: <type>" line naming its data's "type" (OpenAI's
  // Responses streams).
  bool named_events = false;
  std::shared_ptr<ResponseFormatter> formatter;
  // SGLang's custom_labels from the body: added to the call's metric labels, over the
  // custom-labels header's.
  std::map<std::string, std::string> metric_labels;
  // SGLang's log_metrics / no_logs (ResponseWriter's).
  bool log_metrics = true;
  bool no_logs = false;
  // Runs once when the call ends, before its last answer is written: with the choices when every
  // one has finished, with nullptr when the call was refused. Optional (sessions record outputs).
  std::function<void(const std::vector<ChoiceState>*)> on_end;
};

// Runs a parsed request: answers a parse error at once, else submits the plan and lets its
// formatter answer. A stream ends with the event "[DONE]", as on SGLang's and OpenAI's routes,
// or "[done]" (RTP-LLM's, after a normal end only); LightLLM's and TGI's streams just end.
void Serve(ServerContext& ctx, ResponseWriterPtr writer, ErrorStyle errors,
           ApiExpected<ServingPlan> plan);

// The first choice that ended with an error status after admission (an abort with a 4xx/5xx
// status), as the error to answer with; nullptr when none did.
std::optional<ApiError> FailedChoice(const std::vector<ChoiceState>& choices);

// Answers a non-generating route: 200 with the value, or the error in the route's style.
void SendResult(ResponseWriter& writer, const ApiExpected<nlohmann::json>& result,
                ErrorStyle errors = ErrorStyle::kOpenAi);

}  // namespace radixserve::api

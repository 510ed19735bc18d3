// ResponseWriter: how an API handler answers, independent of the HTTP server that carries it
// (http::Responder implements it for a connection; background responses and tests have their
// own). A handler either sends one complete response, or starts a Server-Sent-Events stream,
// sends events, and ends it.
//
// Thread safety: every method may be called from any thread (engine events arrive on the engine
// thread); implementations serialize them. Calls after the response completed or after the
// client disconnected are ignored.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

namespace radixserve::api {

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;

  virtual void Send(int status, std::string content_type, std::string body) = 0;

  // 200 with Content-Type text/event-stream; then each SendEvent writes "data: <data>\n\n".
  virtual void StartStream() = 0;
  virtual void SendEvent(std::string data) = 0;
  // An event with an "event: <name>" line before its data (OpenAI's Responses streams); writers
  // without names send the data alone.
  virtual void SendNamedEvent(std::string /*name*/, std::string data) {
    SendEvent(std::move(data));
  }
  virtual void EndStream() = 0;

  // `callback` runs once (on any thread) if the client goes away before the response
  // completes; handlers abort their engine requests from it.
  virtual void OnDisconnect(std::function<void()> callback) = 0;

  // Runs `task` on the transport's side (an HTTP I/O thread), tasks of one writer in posting
  // order. The engine's event sinks post here, so that formatting (JSON, SSE framing) never
  // runs on the engine thread. The default runs the task at once, on the caller's thread.
  virtual void Post(std::function<void()> task) { task(); }

  // The custom labels of this request's tokenizer-side metrics (SGLang's custom-labels header,
  // or /generate's custom_labels); keys outside --tokenizer-metrics-allowed-customer-labels are
  // dropped by ServingMetrics::Requests. Set before the handler submits the call.
  std::map<std::string, std::string> metric_labels;
  // SGLang's log_metrics (false: the call adds nothing to the tokenizer-side metrics) and
  // no_logs (true: neither --log-requests nor the crash dump records it, e.g. for zero data
  // retention). Set before the handler submits the call.
  bool log_metrics = true;
  bool no_logs = false;
};

using ResponseWriterPtr = std::shared_ptr<ResponseWriter>;

}  // namespace radixserve::api

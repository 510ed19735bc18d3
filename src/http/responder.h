// Responder: a handler's handle on the response to one request, and the HTTP implementation of
// the API's api::ResponseWriter (the one interface every route answers through). Either Send() one
// complete response, or StartStream() a Server-Sent-Events response, SendEvent() any number of
// events and EndStream(). Every method may be called from any thread: calls are marshalled onto
// the connection's strand, in call order per calling thread.
//
// Lifetime: held through ResponderPtr by the handler and whoever produces the answer later (the
// engine's output path). It keeps its connection object alive. If the last reference goes away
// without a response, the client gets a 500; an unfinished stream is ended.
//
// Disconnects: OnDisconnect() registers a callback that runs once, on an I/O thread (or at once
// on the caller's thread if the client is already gone), when the client goes away before the
// response completed, or the connection is dropped because a slow reader let more than
// ServerOptions::max_pending_write_bytes pile up, or the server force-closes it on shutdown. The
// callback must not block (abort the engine request and return). disconnected() polls the same.
// Calls after the response completed or after a disconnect are ignored.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "api/response_writer.h"
#include "http/disconnect_signal.h"
#include "http/request.h"
#include "http/server_options.h"

namespace radixserve::http {

class HttpSession;

class Responder final : public api::ResponseWriter {
 public:
  Responder(std::shared_ptr<HttpSession> session, uint64_t response_id,
            std::shared_ptr<DisconnectSignal> disconnect, bool head_request);
  ~Responder() override;
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;

  // One complete response with Content-Length. `headers` are added after the defaults.
  void Send(int status, std::string content_type, std::string body, HeaderList headers);
  void Send(int status, std::string content_type, std::string body) override {
    Send(status, std::move(content_type), std::move(body), HeaderList{});
  }

  // 200 "text/event-stream; charset=utf-8", chunked; then SendEvent writes "data: <data>\n\n"
  // (a multi-line `data` becomes several data: lines). EndStream finishes the response; the
  // caller sends "[DONE]" itself if its protocol wants it.
  void StartStream(HeaderList headers);
  void StartStream() override { StartStream(HeaderList{}); }
  void SendEvent(std::string data) override { SendSse(data, {}); }
  // An "event: <name>" line precedes the data (OpenAI's Responses streams).
  void SendNamedEvent(std::string name, std::string data) override { SendSse(data, name); }
  void EndStream() override;

  void OnDisconnect(std::function<void()> callback) override;
  // Runs `task` on the connection's I/O strand, in posting order: where a producer on another
  // thread (the engine) hands its output over to be formatted.
  void Post(std::function<void()> task) override;
  bool disconnected() const { return disconnect_->fired(); }

  // Headers added to whatever response this Responder sends (CORS). Server use only: called
  // before the handler receives the Responder.
  void SetDefaultHeaders(HeaderList headers) { default_headers_ = std::move(headers); }
  // Where to report the response status (ServerOptions::on_response), with the request's method
  // and matched endpoint. Server use only, like SetDefaultHeaders; `observer` outlives this.
  void SetObserver(const std::function<void(const ResponseInfo&)>* observer, std::string method,
                   std::string endpoint) {
    observer_ = observer;
    method_ = std::move(method);
    endpoint_ = std::move(endpoint);
  }

 private:
  void SendSse(std::string_view data, std::string_view event);
  HeaderList MergedHeaders(HeaderList extra) const;
  void Observe(int status) const;

  std::shared_ptr<HttpSession> session_;
  uint64_t response_id_;
  std::shared_ptr<DisconnectSignal> disconnect_;
  bool head_request_;
  HeaderList default_headers_;
  const std::function<void(const ResponseInfo&)>* observer_ = nullptr;
  std::string method_;
  std::string endpoint_;
  std::atomic<bool> started_{false};   // Send or StartStream was called
  std::atomic<bool> finished_{false};  // Send or EndStream was called
};

using ResponderPtr = std::shared_ptr<Responder>;

}  // namespace radixserve::http

#include "http/responder.h"

#include "http/http_error.h"
#include "http/http_session.h"
#include "http/wire_format.h"

namespace radixserve::http {

Responder::Responder(std::shared_ptr<HttpSession> session, uint64_t response_id,
                     std::shared_ptr<DisconnectSignal> disconnect, bool head_request)
    : session_(std::move(session)),
      response_id_(response_id),
      disconnect_(std::move(disconnect)),
      head_request_(head_request) {}

Responder::~Responder() {
  if (finished_.load()) return;
  if (started_.load()) {
    session_->PostEndStream(response_id_);
  } else {
    Observe(500);
    session_->PostComplete(response_id_, 500,
                           MergedHeaders({{"Content-Type", std::string(kJsonContentType)}}),
                           ErrorBody(500, "Internal server error: the handler sent no response",
                                     "InternalServerError"),
                           head_request_);
  }
}

HeaderList Responder::MergedHeaders(HeaderList extra) const {
  HeaderList all = default_headers_;
  for (auto& h : extra) all.push_back(std::move(h));
  return all;
}

void Responder::Send(int status, std::string content_type, std::string body, HeaderList headers) {
  if (started_.exchange(true)) return;
  finished_.store(true);
  Observe(status);
  HeaderList all = MergedHeaders({{"Content-Type", std::move(content_type)}});
  for (auto& h : headers) all.push_back(std::move(h));
  session_->PostComplete(response_id_, status, std::move(all), std::move(body), head_request_);
}

void Responder::StartStream(HeaderList headers) {
  if (started_.exchange(true)) return;
  Observe(200);
  HeaderList all = MergedHeaders(
      {{"Content-Type", "text/event-stream; charset=utf-8"}, {"Cache-Control", "no-cache"}});
  for (auto& h : headers) all.push_back(std::move(h));
  session_->PostStartStream(response_id_, std::move(all), head_request_);
}

void Responder::Observe(int status) const {
  if (observer_ == nullptr || !*observer_) return;
  (*observer_)(ResponseInfo{.method = method_, .endpoint = endpoint_, .status = status});
}

void Responder::SendSse(std::string_view data, std::string_view event) {
  if (!started_.load() || finished_.load() || disconnect_->fired()) return;
  session_->PostStreamData(response_id_, FormatSseEvent(data, event));
}

void Responder::EndStream() {
  if (!started_.load() || finished_.exchange(true)) return;
  session_->PostEndStream(response_id_);
}

void Responder::Post(std::function<void()> task) { session_->PostTask(std::move(task)); }

void Responder::OnDisconnect(std::function<void()> callback) {
  disconnect_->Subscribe(std::move(callback));
}

}  // namespace radixserve::http

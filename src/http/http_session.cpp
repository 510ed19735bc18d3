#include "http/http_session.h"

#include <malloc.h>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>

#include <cctype>
#include <cstring>

#include "common/log.h"
#include "http/dispatcher.h"
#include "http/http_error.h"
#include "http/responder.h"
#include "http/wire_format.h"

namespace radixserve::http {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using boost::system::error_code;

namespace {
// While a response is in progress, input beyond this stays in the kernel (no disconnect
// detection until the response is done): bounds memory for clients that pipeline a lot.
constexpr std::size_t kMaxBufferedInput = 64 * 1024;
constexpr std::chrono::milliseconds kLingerTimeout{2'000};
// Bodies at least this large give their freed heap back to the OS once handled.
constexpr std::size_t kTrimAfterBodyBytes = std::size_t{1} << 20;
// Bodies up to this size are not counted against the server-wide BodyBudget.
constexpr std::size_t kUnbudgetedBodyBytes = std::size_t{64} << 10;
}  // namespace

HttpSession::HttpSession(std::shared_ptr<net::io_context> ioc, net::ip::tcp::socket socket,
                         const ServerOptions& options, const Dispatcher& dispatcher,
                         const AccessLog& access_log, BodyBudget& body_budget, uint64_t id,
                         std::function<void(uint64_t)> on_closed)
    : ioc_(std::move(ioc)),
      socket_(std::move(socket)),
      read_timer_(socket_.get_executor()),
      write_timer_(socket_.get_executor()),
      options_(options),
      dispatcher_(dispatcher),
      access_log_(access_log),
      id_(id),
      on_closed_(std::move(on_closed)),
      body_reservation_(body_budget) {}

HttpSession::~HttpSession() = default;

void HttpSession::Start() {
  net::post(socket_.get_executor(), [self = shared_from_this()] {
    error_code ec;
    self->socket_.set_option(net::ip::tcp::no_delay(true), ec);
    if (auto peer = self->socket_.remote_endpoint(ec); !ec) {
      self->client_ = peer.address().to_string() + ":" + std::to_string(peer.port());
    }
    self->NewParser();
    self->ArmIdleTimer(self->options_.keep_alive_timeout);
    self->DoRead();
  });
}

void HttpSession::NewParser() {
  parser_.emplace();
  continue_sent_ = false;
  parser_->eager(true);
  parser_->header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
  parser_->body_limit(options_.max_body_bytes);
}

void HttpSession::ArmIdleTimer(std::chrono::milliseconds timeout) {
  read_timer_.expires_after(timeout);
  read_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->closed_) return;
    if (self->read_timer_.expiry() > std::chrono::steady_clock::now()) return;  // re-armed
    if (self->phase_ == Phase::kReading || self->phase_ == Phase::kLingering) self->CloseNow();
  });
}

void HttpSession::DoRead() {
  if (reading_ || closed_) return;
  if (phase_ != Phase::kReading && phase_ != Phase::kLingering &&
      buffer_.size() >= kMaxBufferedInput) {
    return;
  }
  reading_ = true;
  // Read into scratch, not buffer_.prepare(): buffer_ is consumed by the parser while this read
  // is pending, which would move the prepared region under the kernel's feet.
  socket_.async_read_some(
      net::buffer(read_chunk_),
      [self = shared_from_this()](error_code ec, std::size_t bytes) { self->OnRead(ec, bytes); });
}

void HttpSession::OnRead(error_code ec, std::size_t bytes) {
  reading_ = false;
  if (closed_) return;
  if (ec) {  // EOF or reset: the client is gone (or finished, when idle)
    CloseNow();
    return;
  }
  if (phase_ != Phase::kLingering) {
    auto space = buffer_.prepare(bytes);
    std::memcpy(space.data(), read_chunk_.data(), bytes);
    buffer_.commit(bytes);
  }
  if (phase_ == Phase::kLingering) {
    buffer_.consume(buffer_.size());
  } else if (phase_ == Phase::kReading) {
    if (!request_started_) {
      request_started_ = true;
      ArmIdleTimer(options_.request_read_timeout);
    }
    Parse();
  }
  DoRead();
}

void HttpSession::Parse() {
  while (phase_ == Phase::kReading && !closed_ && buffer_.size() > 0) {
    error_code ec;
    std::size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (parser_->is_header_done() && !ReserveBody()) return;
    if (ec == bhttp::error::need_more) return;
    if (ec == bhttp::error::body_limit) {
      RejectRequest(413,
                    "Request body is larger than the limit of " +
                        std::to_string(options_.max_body_bytes) + " bytes.",
                    "RequestEntityTooLarge");
      return;
    }
    if (ec == bhttp::error::header_limit) {
      RejectRequest(431, "Request header fields too large.", "RequestHeaderFieldsTooLarge");
      return;
    }
    if (ec) {
      RejectRequest(400, "Malformed HTTP request: " + ec.message(), "BadRequestError");
      return;
    }
    if (parser_->is_done()) {
      DispatchRequest();
      return;
    }
    if (parser_->is_header_done() && !continue_sent_) {
      // curl and others wait for this before sending a large body.
      continue_sent_ = true;
      if (boost::beast::iequals(parser_->get()[bhttp::field::expect], "100-continue")) {
        Enqueue("HTTP/1.1 100 Continue\r\n\r\n");
      }
    }
    if (used == 0) return;
  }
}

bool HttpSession::ReserveBody() {
  // A declared length is reserved whole before the body is read (Beast allocates it up front);
  // a chunked body is reserved as it arrives.
  std::size_t needed = parser_->content_length()
                           ? static_cast<std::size_t>(*parser_->content_length())
                           : parser_->get().body().size();
  // Small bodies never wait on the budget (each connection's input is bounded like its read
  // buffer), so slow large uploads cannot starve ordinary requests.
  if (needed <= kUnbudgetedBodyBytes) return true;
  if (body_reservation_.GrowTo(needed)) return true;
  RejectRequest(503,
                "The server is holding too many request bodies at once (limit " +
                    std::to_string(options_.max_buffered_body_bytes) +
                    " bytes, --max-buffered-body-mb); retry shortly.",
                "ServiceUnavailable");
  return false;
}

void HttpSession::RejectRequest(int status, std::string_view message, std::string_view type) {
  read_timer_.cancel();
  body_reservation_.Reset();
  request_method_.clear();
  if (parser_ && parser_->is_header_done()) {
    const auto& head = parser_->get();
    request_method_ = std::string(head.method_string());
    request_target_ = std::string(head.target());
    request_version_ = head.version();
  }
  keep_alive_ = false;
  ++response_id_;
  phase_ = Phase::kAwaitingResponse;
  Complete(response_id_, status, {{"Content-Type", std::string(kJsonContentType)}},
           ErrorBody(status, message, type), false);
}

void HttpSession::DispatchRequest() {
  read_timer_.cancel();
  bhttp::request<bhttp::string_body> message = parser_->release();
  Request request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  request_method_ = request.method;
  request_target_ = request.target;
  request_version_ = message.version();
  for (const auto& field : message) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    request.headers.emplace_back(std::move(name), std::string(field.value()));
  }
  keep_alive_ = message.keep_alive() && !draining_;
  chunked_ = message.version() >= 11;
  head_request_ = request.method == "HEAD";
  request.body = std::move(message.body());

  auto split = SplitTarget(request.target);
  if (!split) {
    RejectRequest(400, "Malformed request target.", "BadRequestError");
    return;
  }
  request.path = std::move(split->first);
  request.query = std::move(split->second);

  ++response_id_;
  phase_ = Phase::kAwaitingResponse;
  disconnect_ = std::make_shared<DisconnectSignal>();
  auto responder =
      std::make_shared<Responder>(shared_from_this(), response_id_, disconnect_, head_request_);
  const std::size_t body_bytes = request.body.size();
  dispatcher_.Dispatch(std::move(request), std::move(responder));
  body_reservation_.Reset();
  // A big body and its parsed JSON are freed by now; without a trim glibc keeps those pages
  // (hundreds of MB after a few large requests) for good.
  if (body_bytes >= kTrimAfterBodyBytes) malloc_trim(0);
}

HeaderList HttpSession::ConnectionHeaders(HeaderList headers) const {
  if (!keep_alive_) {
    headers.emplace_back("Connection", "close");
  } else if (!chunked_) {
    headers.emplace_back("Connection", "keep-alive");  // HTTP/1.0 client that asked for it
  }
  return headers;
}

void HttpSession::Complete(uint64_t response_id, int status, HeaderList headers, std::string body,
                           bool head_request) {
  if (closed_ || response_id != response_id_ || phase_ != Phase::kAwaitingResponse) return;
  LogAccess(status);
  headers.emplace_back("Content-Length", std::to_string(body.size()));
  std::string bytes = FormatResponseHead(status, ConnectionHeaders(std::move(headers)));
  if (!head_request) bytes += body;
  phase_ = Phase::kFlushing;
  disconnect_.reset();
  Enqueue(std::move(bytes));
}

void HttpSession::StartStream(uint64_t response_id, HeaderList headers, bool head_request) {
  if (closed_ || response_id != response_id_ || phase_ != Phase::kAwaitingResponse) return;
  if (chunked_) {
    headers.emplace_back("Transfer-Encoding", "chunked");
  } else {
    keep_alive_ = false;  // HTTP/1.0: the body ends when the connection does
  }
  LogAccess(200);
  std::string head = FormatResponseHead(200, ConnectionHeaders(std::move(headers)));
  if (head_request) {
    phase_ = Phase::kFlushing;
    disconnect_.reset();
  } else {
    phase_ = Phase::kStreaming;
  }
  Enqueue(std::move(head));
}

void HttpSession::StreamData(uint64_t response_id, std::string sse_bytes) {
  if (closed_ || response_id != response_id_ || phase_ != Phase::kStreaming) return;
  if (sse_bytes.empty()) return;
  if (out_bytes_ + sse_bytes.size() > options_.max_pending_write_bytes) {
    RADIX_LOG_WARN("http: dropping connection {}: client reads too slowly ({} bytes pending)", id_,
                   out_bytes_);
    CloseNow();
    return;
  }
  Enqueue(chunked_ ? FormatChunk(sse_bytes) : std::move(sse_bytes));
}

void HttpSession::EndStream(uint64_t response_id) {
  if (closed_ || response_id != response_id_ || phase_ != Phase::kStreaming) return;
  phase_ = Phase::kFlushing;
  disconnect_.reset();
  if (chunked_) {
    Enqueue(std::string(kLastChunk));
  } else if (!writing_ && out_.empty()) {
    AfterFlush();
  }
}

void HttpSession::Enqueue(std::string bytes) {
  out_bytes_ += bytes.size();
  out_.push_back(std::move(bytes));
  if (!writing_) DoWrite();
}

void HttpSession::DoWrite() {
  // Coalesce everything queued into one write: many small SSE events cost one syscall.
  in_flight_.clear();
  while (!out_.empty()) {
    in_flight_ += out_.front();
    out_.pop_front();
  }
  writing_ = true;
  write_timer_.expires_after(options_.write_timeout);
  write_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->closed_ || !self->writing_) return;
    if (self->write_timer_.expiry() > std::chrono::steady_clock::now()) return;
    RADIX_LOG_WARN("http: write timeout on connection {}", self->id_);
    self->CloseNow();
  });
  net::async_write(socket_, net::buffer(in_flight_),
                   [self = shared_from_this()](error_code ec, std::size_t) { self->OnWrite(ec); });
}

void HttpSession::OnWrite(error_code ec) {
  writing_ = false;
  if (closed_) return;
  write_timer_.cancel();
  if (ec) {
    CloseNow();
    return;
  }
  out_bytes_ -= in_flight_.size();
  in_flight_.clear();
  if (!out_.empty()) {
    DoWrite();
  } else if (phase_ == Phase::kFlushing) {
    AfterFlush();
  }
}

void HttpSession::AfterFlush() {
  if (!keep_alive_) {
    Linger();
    return;
  }
  phase_ = Phase::kReading;
  request_started_ = buffer_.size() > 0;
  NewParser();
  ArmIdleTimer(request_started_ ? options_.request_read_timeout : options_.keep_alive_timeout);
  Parse();  // a pipelined request may already be buffered
  DoRead();
}

void HttpSession::Linger() {
  phase_ = Phase::kLingering;
  error_code ec;
  socket_.shutdown(net::ip::tcp::socket::shutdown_send, ec);
  buffer_.consume(buffer_.size());
  ArmIdleTimer(kLingerTimeout);
  DoRead();
}

void HttpSession::CloseNow() {
  if (closed_) return;
  closed_ = true;
  closed_flag_.store(true, std::memory_order_release);
  read_timer_.cancel();
  write_timer_.cancel();
  error_code ec;
  socket_.shutdown(net::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  out_.clear();
  out_bytes_ = 0;
  body_reservation_.Reset();
  if (auto signal = std::move(disconnect_)) signal->Fire();
  if (on_closed_) on_closed_(id_);
}

void HttpSession::LogAccess(int status) const {
  // A request whose head never parsed has no request line; uvicorn logs none for it either.
  if (request_method_.empty()) return;
  access_log_.Record(client_, request_method_, request_target_, request_version_, status);
}

void HttpSession::PostBeginDrain() {
  net::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->closed_) return;
    self->draining_ = true;
    if (self->phase_ == Phase::kReading && !self->request_started_) {
      self->CloseNow();
    } else if (self->phase_ == Phase::kAwaitingResponse || self->phase_ == Phase::kReading) {
      self->keep_alive_ = false;  // answer the current request with Connection: close
    } else if (self->phase_ == Phase::kStreaming || self->phase_ == Phase::kFlushing) {
      self->keep_alive_ = false;  // close once the stream ends
    }
  });
}

void HttpSession::PostClose() {
  net::post(socket_.get_executor(), [self = shared_from_this()] { self->CloseNow(); });
}

void HttpSession::PostComplete(uint64_t response_id, int status, HeaderList headers,
                               std::string body, bool head_request) {
  if (closed_flag_.load(std::memory_order_acquire)) return;
  net::post(socket_.get_executor(), [self = shared_from_this(), response_id, status,
                                     headers = std::move(headers), body = std::move(body),
                                     head_request]() mutable {
    self->Complete(response_id, status, std::move(headers), std::move(body), head_request);
  });
}

void HttpSession::PostStartStream(uint64_t response_id, HeaderList headers, bool head_request) {
  if (closed_flag_.load(std::memory_order_acquire)) return;
  net::post(socket_.get_executor(), [self = shared_from_this(), response_id,
                                     headers = std::move(headers), head_request]() mutable {
    self->StartStream(response_id, std::move(headers), head_request);
  });
}

void HttpSession::PostStreamData(uint64_t response_id, std::string sse_bytes) {
  if (closed_flag_.load(std::memory_order_acquire)) return;
  net::post(socket_.get_executor(),
            [self = shared_from_this(), response_id, bytes = std::move(sse_bytes)]() mutable {
              self->StreamData(response_id, std::move(bytes));
            });
}

void HttpSession::PostEndStream(uint64_t response_id) {
  if (closed_flag_.load(std::memory_order_acquire)) return;
  net::post(socket_.get_executor(),
            [self = shared_from_this(), response_id] { self->EndStream(response_id); });
}

void HttpSession::PostTask(std::function<void()> task) {
  net::post(socket_.get_executor(), std::move(task));
}

}  // namespace radixserve::http

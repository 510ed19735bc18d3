// HttpSession: one client connection. Reads requests one at a time (pipelined requests wait in
// the read buffer until the current response is fully written), hands each to the Dispatcher,
// and writes the answer its Responder produces: a complete response or a chunked SSE stream.
//
// Threading: all state lives on the connection's strand. The Post* methods may be called from
// any thread; they queue work on the strand. While a response is in progress the socket keeps
// being read (into the buffer, bounded) so a client that closes is noticed at once and the
// response's DisconnectSignal fires.
//
// Timeouts: keep_alive_timeout while waiting for the first byte of a request,
// request_read_timeout for the rest of it, write_timeout per socket write. Pending output is
// bounded by max_pending_write_bytes; overflowing it drops the connection.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "http/access_log.h"
#include "http/body_budget.h"
#include "http/disconnect_signal.h"
#include "http/request.h"
#include "http/server_options.h"

namespace radixserve::http {

class Dispatcher;

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  // `socket` must be bound to a strand executor of `*ioc`. `dispatcher` and `access_log` must
  // outlive every request dispatch (the server closes all sessions before it goes away).
  // `on_closed` runs once, on the strand, when the connection closes.
  HttpSession(std::shared_ptr<boost::asio::io_context> ioc, boost::asio::ip::tcp::socket socket,
              const ServerOptions& options, const Dispatcher& dispatcher,
              const AccessLog& access_log, BodyBudget& body_budget, uint64_t id,
              std::function<void(uint64_t)> on_closed);
  ~HttpSession();

  void Start();
  uint64_t id() const { return id_; }

  // Graceful: close now if idle, else after the current response (sent with Connection: close).
  void PostBeginDrain();
  // Immediate close; an in-progress response's DisconnectSignal fires.
  void PostClose();

  // Responder entry points (any thread). Stale ids (an earlier response) are ignored.
  void PostComplete(uint64_t response_id, int status, HeaderList headers, std::string body,
                    bool head_request);
  void PostStartStream(uint64_t response_id, HeaderList headers, bool head_request);
  void PostStreamData(uint64_t response_id, std::string sse_bytes);
  void PostEndStream(uint64_t response_id);
  // Runs `task` on this connection's strand (after what was posted before it), even once the
  // connection has closed, as long as the server's I/O threads run.
  void PostTask(std::function<void()> task);

 private:
  // kLingering: our side is shut down after a Connection: close response; unread input is
  // drained briefly so the peer sees the response rather than a reset.
  enum class Phase { kReading, kAwaitingResponse, kStreaming, kFlushing, kLingering };

  void NewParser();
  void ArmIdleTimer(std::chrono::milliseconds timeout);
  void DoRead();
  void OnRead(boost::system::error_code ec, std::size_t bytes);
  void Parse();
  // Holds the request's body against the server-wide budget; on failure answers 503.
  bool ReserveBody();
  void RejectRequest(int status, std::string_view message, std::string_view type);
  void DispatchRequest();

  void Complete(uint64_t response_id, int status, HeaderList headers, std::string body,
                bool head_request);
  void StartStream(uint64_t response_id, HeaderList headers, bool head_request);
  void StreamData(uint64_t response_id, std::string sse_bytes);
  void EndStream(uint64_t response_id);
  HeaderList ConnectionHeaders(HeaderList headers) const;

  void Enqueue(std::string bytes);
  void DoWrite();
  void OnWrite(boost::system::error_code ec);
  void AfterFlush();
  void Linger();
  void CloseNow();
  void LogAccess(int status) const;

  // Declared first so the io_context outlives the socket and timers.
  std::shared_ptr<boost::asio::io_context> ioc_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer read_timer_;
  boost::asio::steady_timer write_timer_;
  ServerOptions options_;
  const Dispatcher& dispatcher_;
  const AccessLog& access_log_;
  uint64_t id_;
  std::function<void(uint64_t)> on_closed_;

  boost::beast::flat_buffer buffer_;
  std::array<char, 8192> read_chunk_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  // The current request's body bytes, held against the server-wide budget until it is handled.
  BodyReservation body_reservation_;
  Phase phase_ = Phase::kReading;
  bool reading_ = false;
  bool request_started_ = false;  // a byte of the next request arrived
  bool continue_sent_ = false;    // the Expect: 100-continue check ran for this request
  bool keep_alive_ = true;
  bool chunked_ = true;  // HTTP/1.1 client: stream with chunked coding
  bool head_request_ = false;
  bool draining_ = false;
  bool closed_ = false;
  std::atomic<bool> closed_flag_{false};  // closed_, readable off the strand
  uint64_t response_id_ = 0;
  std::shared_ptr<DisconnectSignal> disconnect_;  // of the response in progress
  // For the access log: the peer ("address:port") and the current request line.
  std::string client_;
  std::string request_method_;
  std::string request_target_;
  unsigned request_version_ = 11;

  std::deque<std::string> out_;
  std::size_t out_bytes_ = 0;
  bool writing_ = false;
  std::string in_flight_;  // bytes of the current async_write
};

}  // namespace radixserve::http

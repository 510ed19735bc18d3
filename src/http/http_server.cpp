#include "http/http_server.h"

#include <boost/asio/post.hpp>
#include <csignal>

#include "common/log.h"
#include "http/fd_limit.h"
#include "http/http_session.h"

namespace radixserve::http {

namespace net = boost::asio;
using boost::system::error_code;

HttpServer::HttpServer(ServerOptions options, Router router)
    : options_(std::move(options)),
      dispatcher_(std::move(router), ApiKeyCheck(options_.api_key, options_.admin_api_key),
                  options_.on_response, CorsPolicy(options_.allowed_origins),
                  HostGuard(options_.host, options_.allowed_hosts)),
      body_budget_(options_.max_buffered_body_bytes),
      ioc_(std::make_shared<net::io_context>(options_.io_threads)),
      strand_(net::make_strand(*ioc_)),
      acceptor_(strand_),
      grace_timer_(strand_),
      accept_retry_timer_(strand_) {}

HttpServer::~HttpServer() {
  Shutdown();
  // Run what Responders posted to connections that are closed by now, so nothing they hold
  // outlives the server.
  ioc_->restart();
  ioc_->poll();
}

Status HttpServer::Start() {
  RADIX_CHECK_MSG(threads_.empty(), "HttpServer::Start called twice");
  RADIX_ASSIGN_OR_RETURN(access_log_, AccessLog::Create(options_.log_level_http));
  RaiseOpenFileLimit();
  error_code ec;
  auto address = net::ip::make_address(options_.host, ec);
  if (ec) return InvalidArgument("--host: not an IP address: " + options_.host);
  net::ip::tcp::endpoint endpoint(address, options_.port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return InvalidArgument("cannot listen on " + options_.host + ":" +
                           std::to_string(options_.port) + ": " + ec.message());
  }
  bound_port_ = acceptor_.local_endpoint().port();
  work_.emplace(ioc_->get_executor());
  net::post(strand_, [this] { DoAccept(); });
  int n = std::max(1, options_.io_threads);
  threads_.reserve(n);
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { ioc_->run(); });
  RADIX_LOG_INFO("HTTP server listening on {}:{} with {} I/O threads", options_.host, bound_port_,
                 n);
  return Status::Ok();
}

void HttpServer::DoAccept() {
  acceptor_.async_accept(
      net::make_strand(*ioc_), [this](error_code ec, net::ip::tcp::socket socket) {
        if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
        if (ec) {
          // Out of file descriptors and the like: keep serving the connections we have and retry
          // shortly instead of spinning on the error.
          RADIX_LOG_WARN("http: accept failed: {}", ec.message());
          accept_retry_timer_.expires_after(std::chrono::milliseconds(100));
          accept_retry_timer_.async_wait([this](error_code wait_ec) {
            if (!wait_ec && acceptor_.is_open()) DoAccept();
          });
          return;
        } else {
          std::shared_ptr<HttpSession> session;
          {
            std::lock_guard<std::mutex> lock(sessions_mutex_);
            uint64_t id = next_session_id_++;
            auto on_closed = [this](uint64_t closed) { OnSessionClosed(closed); };
            session =
                std::make_shared<HttpSession>(ioc_, std::move(socket), options_, dispatcher_,
                                              access_log_, body_budget_, id, std::move(on_closed));
            sessions_.emplace(id, session);
          }
          session->Start();
        }
        DoAccept();
      });
}

void HttpServer::OnSessionClosed(uint64_t id) {
  bool finish = false;
  {
    std::lock_guard<std::mutex> lock(sessions_mutex_);
    sessions_.erase(id);
    finish = draining_ && sessions_.empty();
  }
  if (finish) net::post(strand_, [this] { FinishOnStrand(); });
}

std::size_t HttpServer::open_connections() const {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  return sessions_.size();
}

void HttpServer::HandleSignals(std::function<void(int signal_number)> on_signal) {
  RADIX_CHECK_MSG(!signals_.has_value(), "HttpServer::HandleSignals called twice");
  // Installed synchronously: once this returns, SIGINT/SIGTERM no longer kill the process.
  signals_.emplace(strand_, SIGINT, SIGTERM);
  on_signal_ = std::move(on_signal);
  WaitForSignal();
}

void HttpServer::WaitForSignal() {
  signals_->async_wait([this](error_code ec, int signal_number) {
    if (ec) return;
    if (received_signal_ == 0) received_signal_ = signal_number;
    if (on_signal_) {
      on_signal_(signal_number);
      WaitForSignal();  // a second signal reaches the owner too (e.g. to skip the grace period)
      return;
    }
    RADIX_LOG_INFO("Received signal {}; shutting down", signal_number);
    BeginShutdown();
  });
}

void HttpServer::BeginShutdown() {
  if (shutdown_requested_.exchange(true)) return;
  if (!work_) return;  // never started
  net::post(strand_, [this] { DrainOnStrand(); });
}

void HttpServer::DrainOnStrand() {
  error_code ec;
  acceptor_.close(ec);
  accept_retry_timer_.cancel();
  if (signals_) signals_->cancel(ec);
  std::vector<std::shared_ptr<HttpSession>> open;
  {
    std::lock_guard<std::mutex> lock(sessions_mutex_);
    draining_ = true;
    for (auto& [id, weak] : sessions_) {
      if (auto s = weak.lock()) open.push_back(std::move(s));
    }
    if (sessions_.empty()) {
      net::post(strand_, [this] { FinishOnStrand(); });
      return;
    }
  }
  RADIX_LOG_INFO("HTTP server draining {} connections", open.size());
  for (auto& s : open) s->PostBeginDrain();
  grace_timer_.expires_after(options_.shutdown_grace);
  grace_timer_.async_wait([this](error_code wait_ec) {
    if (!wait_ec) ForceCloseAll();
  });
}

void HttpServer::ForceCloseAll() {
  std::vector<std::shared_ptr<HttpSession>> open;
  {
    std::lock_guard<std::mutex> lock(sessions_mutex_);
    for (auto& [id, weak] : sessions_) {
      if (auto s = weak.lock()) open.push_back(std::move(s));
    }
  }
  if (!open.empty()) {
    RADIX_LOG_WARN("HTTP server: closing {} connections still open after the grace period",
                   open.size());
  }
  for (auto& s : open) s->PostClose();
}

void HttpServer::FinishOnStrand() {
  {
    std::lock_guard<std::mutex> lock(sessions_mutex_);
    if (finished_) return;
    finished_ = true;
  }
  grace_timer_.cancel();
  work_.reset();
  ioc_->stop();
}

void HttpServer::Wait() {
  std::lock_guard<std::mutex> lock(wait_mutex_);
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace radixserve::http

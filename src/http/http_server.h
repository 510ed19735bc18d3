// HttpServer: the listening socket, a fixed pool of I/O threads running one io_context, and the
// set of open connections (HttpSession). Requests go through a Dispatcher (CORS, API key, Router).
//
// Lifecycle (call from one controlling thread, never from an I/O thread):
//   HttpServer server(options, std::move(router));
//   RADIX_RETURN_IF_ERROR(server.Start());  // binds --host/--port, starts the I/O threads
//   server.HandleSignals();                 // optional: SIGINT/SIGTERM -> BeginShutdown()
//   server.Wait();                          // returns once shut down
// BeginShutdown() (any thread, idempotent, non-blocking) stops accepting, closes idle
// connections, lets in-flight responses finish for ServerOptions::shutdown_grace, then
// force-closes the rest (their Responders see a disconnect) and stops the I/O threads.
// The destructor shuts down and waits.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "http/access_log.h"
#include "http/body_budget.h"
#include "http/dispatcher.h"
#include "http/router.h"
#include "http/server_options.h"

namespace radixserve::http {

class HttpSession;

class HttpServer {
 public:
  HttpServer(ServerOptions options, Router router);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens on options.host:options.port and starts options.io_threads threads.
  // An address that cannot be bound, or an unknown options.log_level_http, is an error Status
  // (InvalidArgument). Also raises this process's RLIMIT_NOFILE soft limit to the hard limit
  // (each connection holds a descriptor) and logs both.
  Status Start();
  // The bound port (useful with port 0). Valid after a successful Start.
  uint16_t port() const { return bound_port_; }

  // SIGINT/SIGTERM start BeginShutdown() (asio signal_set: the OS handler only wakes an I/O
  // thread). With `on_signal`, each signal calls it instead (on an I/O thread; it must not block)
  // and the owner decides when to shut down (a graceful drain of the engine first).
  // Call once, from the controlling thread, after Start() and before any shutdown.
  void HandleSignals(std::function<void(int signal_number)> on_signal = {});
  // Not async-signal-safe: call it from a normal thread, or use HandleSignals().
  void BeginShutdown();
  void Wait();
  void Shutdown() {
    BeginShutdown();
    Wait();
  }

  // The signal that started the shutdown (SIGINT or SIGTERM), 0 if none did.
  int received_signal() const { return received_signal_.load(); }

  std::size_t open_connections() const;
  int io_thread_count() const { return static_cast<int>(threads_.size()); }

 private:
  using Executor = boost::asio::strand<boost::asio::io_context::executor_type>;

  void DoAccept();
  void OnSessionClosed(uint64_t id);
  void DrainOnStrand();
  void ForceCloseAll();
  void FinishOnStrand();

  ServerOptions options_;
  Dispatcher dispatcher_;
  AccessLog access_log_;
  BodyBudget body_budget_;  // shared by all sessions; declared before them (ioc_)
  std::shared_ptr<boost::asio::io_context> ioc_;
  Executor strand_;  // acceptor, signals, grace timer
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer grace_timer_;
  boost::asio::steady_timer accept_retry_timer_;
  void WaitForSignal();

  std::optional<boost::asio::signal_set> signals_;
  std::function<void(int)> on_signal_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  uint16_t bound_port_ = 0;

  mutable std::mutex sessions_mutex_;
  std::unordered_map<uint64_t, std::weak_ptr<HttpSession>> sessions_;
  uint64_t next_session_id_ = 1;
  bool draining_ = false;  // guarded by sessions_mutex_
  bool finished_ = false;  // guarded by sessions_mutex_

  std::atomic<bool> shutdown_requested_{false};
  std::atomic<int> received_signal_{0};
  std::mutex wait_mutex_;
};

}  // namespace radixserve::http

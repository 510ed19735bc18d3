// libFuzzer target: the bytes a client sends on one connection, through the server's real request
// path. A real HttpSession reads them from a socketpair, so they meet the production Beast parser
// configuration (eager, header_limit and body_limit from the ServerOptions defaults), request
// construction (method, target, SplitTarget, lower-cased header names, keep-alive, pipelining,
// Expect: 100-continue) and the Dispatcher (CORS, API key, Router with the production route
// table: every api::ApiRoutes() entry plus the web routes). The api routes get stub handlers
// (api_request_fuzz covers the real ones): they read the request as src/main/api_bridge.cpp
// does and answer, sometimes as a stream.
//
// Fails on: a crash or sanitizer report, a hang (-timeout), a 5xx response (nothing here may
// produce one: it would mean the dispatcher caught an exception or a handler sent no answer),
// and output that is not a sequence of HTTP/1.1 responses.
//
// Set RADIX_FUZZ_5XX_DIR to keep going on a 5xx instead: the input is saved there, one file per
// distinct status line and message. RADIX_FUZZ_VERBOSE=1 prints the bytes written back (to check
// seeds: `http_request_fuzz <files>` runs just those).
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "api/routes.h"
#include "common/check.h"
#include "common/log.h"
#include "http/access_log.h"
#include "http/api_key.h"
#include "http/dispatcher.h"
#include "http/http_session.h"
#include "http/router.h"
#include "http/server_options.h"
#include "web/web_routes.h"

namespace {

namespace net = boost::asio;
using namespace radixserve;

// The API key the dispatcher expects ("Authorization: Bearer fuzz-key" in the seeds).
constexpr std::string_view kApiKey = "fuzz-key";

std::string_view g_input;  // the input being run, for the 5xx report

void Report5xx(int status, std::string_view what) {
  const char* dir = std::getenv("RADIX_FUZZ_5XX_DIR");
  if (dir == nullptr || *dir == '\0') {
    std::fprintf(stderr, "http_request_fuzz: a %d response: %.*s\n", status,
                 static_cast<int>(what.size()), what.data());
    std::abort();
  }
  std::string name = std::string(dir) + "/http-" + std::to_string(status) + "-" +
                     std::to_string(std::hash<std::string_view>{}(what));
  std::ofstream(name, std::ios::binary)
      .write(g_input.data(), static_cast<std::streamsize>(g_input.size()));
}

// Reads what an api route's handler sees (api_bridge.cpp builds api::ApiRequest the same way) and
// answers with a digest of it (never raw input bytes, so CheckOutput cannot be fooled by an echoed
// "HTTP/1.1"); `?stream=...` answers as an SSE stream instead.
void StubApiHandler(const http::Request& request, http::ResponderPtr responder) {
  std::string seen = request.method + '\0' + request.path + '\0' + request.path_param + '\0' +
                     request.media_type() + '\0' + request.body;
  std::string digest = "{\"digest\":" + std::to_string(std::hash<std::string>{}(seen)) + "}";
  if (auto stream = request.query_param("stream")) {
    responder->StartStream();
    responder->SendEvent(digest);
    responder->SendEvent(std::to_string(stream->size()));
    responder->SendEvent("[DONE]");
    responder->EndStream();
    return;
  }
  responder->Send(200, "application/json", std::move(digest));
}

struct Server {
  std::shared_ptr<net::io_context> ioc = std::make_shared<net::io_context>();
  http::ServerOptions options;
  http::AccessLog access_log;  // disabled: Record() is still called, and returns
  // Small, so declared lengths past it take the 503 path; empty again after every input.
  http::BodyBudget body_budget{std::size_t{1} << 20};
  std::unique_ptr<http::Dispatcher> dispatcher;

  Server() {
    options.api_key = std::string(kApiKey);
    http::Router router;
    for (const api::ApiRoute& route : api::ApiRoutes()) {
      if (route.prefix) {
        router.AddPrefix(route.methods, route.path, StubApiHandler, route.param_name);
      } else {
        router.Add(route.methods, route.path, StubApiHandler);
      }
    }
    web::AddWebRoutes(router);
    dispatcher = std::make_unique<http::Dispatcher>(
        std::move(router), http::ApiKeyCheck(options.api_key), [](const http::ResponseInfo& info) {
          if (info.status >= 500) {
            Report5xx(info.status, std::string(info.method) + " " + std::string(info.endpoint));
          }
        });
  }
};

Server* g_server = nullptr;

// The bytes written back must be HTTP/1.1 responses: each status line is checked where one is
// expected at the start of the output; 100 Continue and error statuses from the parser included.
void CheckOutput(const std::string& out) {
  if (out.empty()) return;  // e.g. the client sent nothing, or an incomplete request
  if (!out.starts_with("HTTP/1.1 ") || out.size() < 12) {
    std::fprintf(stderr, "http_request_fuzz: output does not start with a status line\n");
    std::abort();
  }
  for (std::size_t pos = out.find("\r\nHTTP/1.1 ");; pos = out.find("\r\nHTTP/1.1 ", pos + 1)) {
    std::size_t line = pos == std::string::npos ? 0 : pos + 2;
    int status = std::atoi(out.c_str() + line + 9);
    if (status < 100 || status > 599) {
      std::fprintf(stderr, "http_request_fuzz: bad status line at %zu\n", line);
      std::abort();
    }
    // 503 is the answer to a body over the server-wide body budget, not a failure.
    if (status >= 500 && status != 503) {
      Report5xx(status, out.substr(line, out.find('\n', line) - line));
    }
    if (pos == std::string::npos) break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  InitLogging("critical");  // handler errors would be logged per input
  g_server = new Server();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  g_input = std::string_view(reinterpret_cast<const char*>(data), size);
  int fds[2];
  RADIX_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  const int client = fds[1];
  RADIX_CHECK(fcntl(client, F_SETFL, O_NONBLOCK) == 0);

  net::io_context& ioc = *g_server->ioc;
  ioc.restart();
  // HttpServer binds each accepted socket to a strand; TCP options fail harmlessly on AF_UNIX.
  net::ip::tcp::socket socket(net::make_strand(ioc));
  socket.assign(net::ip::tcp::v4(), fds[0]);
  bool closed = false;
  auto session = std::make_shared<http::HttpSession>(
      g_server->ioc, std::move(socket), g_server->options, *g_server->dispatcher,
      g_server->access_log, g_server->body_budget, 1, [&closed](uint64_t) { closed = true; });
  session->Start();
  session.reset();

  // Feed the input; once the session has done all it can with it, end the stream (EOF: the
  // session treats it as the client leaving, so only then, or pipelined requests would be cut
  // short); collect the output until the session closes.
  std::size_t written = 0;
  bool shut = false;
  std::string out;
  char buf[16384];
  while (!closed) {
    bool moved = false;
    while (written < size) {
      ssize_t n = send(client, data + written, size - written, MSG_NOSIGNAL);
      if (n <= 0) break;
      written += static_cast<std::size_t>(n);
      moved = true;
    }
    for (ssize_t n; (n = recv(client, buf, sizeof buf, 0)) > 0;) {
      out.append(buf, static_cast<std::size_t>(n));
      moved = true;
    }
    if (ioc.poll() > 0) moved = true;
    if (!moved && written == size && !shut) {  // idle: waiting for bytes that will not come
      shutdown(client, SHUT_WR);
      shut = true;
      moved = true;
    }
    // Nothing ready: wait for the session's socket (the session always answers or closes once
    // it has read EOF; a hang is reported by libFuzzer's -timeout).
    if (!moved && !closed) ioc.run_one_for(std::chrono::milliseconds(50));
  }
  ioc.run();  // the cancelled timers' and reads' handlers, which hold the session
  for (ssize_t n; (n = recv(client, buf, sizeof buf, 0)) > 0;) {
    out.append(buf, static_cast<std::size_t>(n));
  }
  close(client);
  if (std::getenv("RADIX_FUZZ_VERBOSE") != nullptr) {  // for writing seeds: what the input did
    std::fprintf(stderr, "%s\n", out.substr(0, 4000).c_str());
  }
  CheckOutput(out);
  RADIX_CHECK(g_server->body_budget.in_use() == 0);  // the closed session gave its body back
  return 0;
}

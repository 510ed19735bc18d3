// ServerOptions: everything the HTTP server core needs, as a plain struct filled by main from
// ServerArgs (--host, --port, --api-key, --log-level-http). Defaults follow SGLang / uvicorn where
// they exist.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace radixserve::http {

// One response as metrics count it (SGLang's sglang:http_responses_total labels).
struct ResponseInfo {
  std::string_view method;
  std::string_view endpoint;  // the matched route's path ("/v1/models/{model}"), else "Unknown"
  int status = 0;             // a stream counts once, with 200, when it starts
};

struct ServerOptions {
  std::string host = "127.0.0.1";  // SGLang's --host default
  uint16_t port = 30000;           // SGLang's --port default; 0 binds an ephemeral port (tests)

  // I/O threads shared by all connections (never one per connection).
  int io_threads = 2;

  // --api-key; empty disables the check. --admin-api-key: required by admin routes when set.
  std::string api_key;
  std::string admin_api_key;
  // --allowed-origins (CORS; "*" = any origin without credentials) and --allowed-hosts (extra
  // Host names accepted when listening on loopback; "*" disables that check).
  std::vector<std::string> allowed_origins = {"*"};
  std::vector<std::string> allowed_hosts;

  // Called once per response a handler or the dispatcher sends (not for requests the parser
  // rejects), on any thread; must be cheap and thread-safe. Empty: nothing is called.
  std::function<void(const ResponseInfo&)> on_response;

  // --log-level-http (main passes --log-level when it is unset): the level of the access log.
  std::string log_level_http = "info";

  // Largest accepted request body: 32 MiB. Bigger bodies get 413 with an OpenAI-shaped JSON
  // error and the connection is closed (the rest of the body is never read).
  std::size_t max_body_bytes = std::size_t{32} << 20;
  // Largest sum of request bodies all connections may hold at once (declared lengths count in
  // full before they arrive). A request that would exceed it gets 503 before its body is read.
  // Bodies up to 64 KiB are exempt, so slow large uploads cannot starve ordinary requests.
  std::size_t max_buffered_body_bytes = std::size_t{256} << 20;
  // Largest request line + headers; bigger gets 431 and the connection is closed.
  std::size_t max_header_bytes = std::size_t{64} << 10;

  // A keep-alive connection with no request byte for this long is closed (uvicorn's default, 5 s).
  std::chrono::milliseconds keep_alive_timeout{5'000};
  // Once the first byte of a request arrived, the whole request must arrive within this.
  std::chrono::milliseconds request_read_timeout{60'000};
  // One socket write that makes no progress for this long closes the connection.
  std::chrono::milliseconds write_timeout{60'000};
  // Graceful shutdown: in-flight responses get this long before connections are force-closed.
  std::chrono::milliseconds shutdown_grace{10'000};

  // Bytes of response data a connection may queue for a slow reader. A stream that would exceed
  // it is dropped (the client counts as disconnected).
  std::size_t max_pending_write_bytes = std::size_t{4} << 20;
};

}  // namespace radixserve::http

// ServerOptions: everything the HTTP server core needs, as a plain struct filled by main from
// ServerArgs (--host, --port, --api-key). Defaults follow SGLang / uvicorn where they exist.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace radixserve::http {

struct ServerOptions {
  std::string host = "127.0.0.1";  // SGLang's --host default
  uint16_t port = 30000;           // SGLang's --port default; 0 binds an ephemeral port (tests)

  // I/O threads shared by all connections (never one per connection).
  int io_threads = 2;

  // --api-key; empty disables the check.
  std::string api_key;

  // Largest accepted request body: 32 MiB. Bigger bodies get 413 with an OpenAI-shaped JSON
  // error and the connection is closed (the rest of the body is never read).
  std::size_t max_body_bytes = std::size_t{32} << 20;
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

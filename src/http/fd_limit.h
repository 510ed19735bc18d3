// RaiseOpenFileLimit: every HTTP connection holds a file descriptor, and the usual soft
// RLIMIT_NOFILE (1024) is below the thousands of concurrent streams the server must hold. Raises
// the soft limit to the hard limit, as far as the kernel allows, and logs the result.
//
// Process-wide; call from the controlling thread (HttpServer::Start does).
#pragma once

#include <cstdint>

namespace radixserve::http {

struct OpenFileLimit {
  uint64_t before = 0;  // soft limit found
  uint64_t after = 0;   // soft limit now in force
  uint64_t hard = 0;
};

OpenFileLimit RaiseOpenFileLimit();

}  // namespace radixserve::http

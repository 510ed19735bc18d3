// AccessLog: one uvicorn-style line per HTTP response, as SGLang's server prints them:
//   [2026-01-01 12:00:00] INFO:     127.0.0.1:54321 - "POST /generate HTTP/1.1" 200 OK
// written when the response starts (status line known; for a stream, when the stream opens).
// Governed by --log-level-http, which follows --log-level when unset: the lines are INFO, so any
// level above info silences them. Shares the sinks and pattern of the default logger.
//
// Immutable after construction; Record may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <spdlog/logger.h>

#include "common/status.h"

namespace radixserve::http {

class AccessLog {
 public:
  // Disabled: Record does nothing.
  AccessLog() = default;
  // `level`: debug, info, warning, error or critical (SGLang's --log-level choices).
  static Expected<AccessLog> Create(std::string_view level);

  bool enabled() const { return logger_ != nullptr && logger_->should_log(spdlog::level::info); }

  // `client` is "address:port"; `target` the raw request target (path and query);
  // `http_version` Beast's encoding (11 for HTTP/1.1, 10 for HTTP/1.0).
  void Record(std::string_view client, std::string_view method, std::string_view target,
              unsigned http_version, int status) const;

  // The line's text after the log prefix (exposed for tests).
  static std::string FormatLine(std::string_view client, std::string_view method,
                                std::string_view target, unsigned http_version, int status);

 private:
  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace radixserve::http

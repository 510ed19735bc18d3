#include "http/access_log.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/beast/http/status.hpp>

#include "common/log_level.h"

#include <optional>

namespace radixserve::http {

Expected<AccessLog> AccessLog::Create(std::string_view level) {
  auto parsed = ParseLogLevel(level);
  if (!parsed) {
    return InvalidArgument("argument --log-level-http: invalid choice: '" + std::string(level) +
                           "' (choose from 'debug', 'info', 'warning', 'error', 'critical')");
  }
  AccessLog log;
  log.logger_ = spdlog::default_logger()->clone("uvicorn.access");
  log.logger_->set_level(*parsed);
  return log;
}

std::string AccessLog::FormatLine(std::string_view client, std::string_view method,
                                  std::string_view target, unsigned http_version, int status) {
  namespace bhttp = boost::beast::http;
  auto phrase = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  // uvicorn's level prefix: "INFO:" padded to 9 columns, then one space.
  return fmt::format("INFO:     {} - \"{} {} HTTP/{}.{}\" {} {}", client, method, target,
                     http_version / 10, http_version % 10, status,
                     std::string_view(phrase.data(), phrase.size()));
}

void AccessLog::Record(std::string_view client, std::string_view method, std::string_view target,
                       unsigned http_version, int status) const {
  if (!enabled()) return;
  logger_->info("{}", FormatLine(client, method, target, http_version, status));
}

}  // namespace radixserve::http

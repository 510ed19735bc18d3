#include "http/wire_format.h"

#include <fmt/format.h>
#include <boost/beast/http/status.hpp>

#include "common/check.h"

namespace radixserve::http {

std::string FormatResponseHead(int status, const HeaderList& headers) {
  namespace bhttp = boost::beast::http;
  auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  std::string out =
      fmt::format("HTTP/1.1 {} {}\r\n", status, std::string_view(reason.data(), reason.size()));
  for (const auto& [name, value] : headers) {
    RADIX_CHECK(name.find_first_of("\r\n:") == std::string::npos);
    RADIX_CHECK(value.find_first_of("\r\n") == std::string::npos);
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  out += "\r\n";
  return out;
}

std::string FormatSseEvent(std::string_view data, std::string_view event) {
  std::string out;
  out.reserve(data.size() + event.size() + 16);
  if (!event.empty()) {
    out += "event: ";
    out += event;
    out += '\n';
  }
  std::size_t start = 0;
  while (true) {
    std::size_t nl = data.find('\n', start);
    out += "data: ";
    out += data.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    out += '\n';
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  out += '\n';
  return out;
}

std::string FormatChunk(std::string_view data) {
  RADIX_CHECK(!data.empty());
  return fmt::format("{:x}\r\n{}\r\n", data.size(), data);
}

}  // namespace radixserve::http

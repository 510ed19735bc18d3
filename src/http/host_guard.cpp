#include "http/host_guard.h"

#include <algorithm>
#include <cctype>

namespace radixserve::http {
namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The host part of a Host header value: "[::1]:8080" -> "[::1]", "a.b:80" -> "a.b".
std::string_view StripPort(std::string_view value) {
  if (value.starts_with('[')) {
    const size_t close = value.find(']');
    return close == std::string_view::npos ? value : value.substr(0, close + 1);
  }
  const size_t colon = value.rfind(':');
  return colon == std::string_view::npos ? value : value.substr(0, colon);
}

// A dotted-quad IPv4 address in 127.0.0.0/8 ("127.0.0.1"; not "127.0.0.1.evil.example").
bool IsLoopbackIpv4(std::string_view h) {
  int parts = 0;
  size_t start = 0;
  while (start <= h.size()) {
    size_t end = h.find('.', start);
    if (end == std::string_view::npos) end = h.size();
    std::string_view part = h.substr(start, end - start);
    if (part.empty() || part.size() > 3) return false;
    int value = 0;
    for (char c : part) {
      if (c < '0' || c > '9') return false;
      value = value * 10 + (c - '0');
    }
    if (value > 255 || (parts == 0 && value != 127)) return false;
    ++parts;
    start = end + 1;
    if (end == h.size()) break;
  }
  return parts == 4;
}

}  // namespace

bool IsLoopbackHost(std::string_view host) {
  const std::string h = Lower(host);
  return h == "localhost" || h.ends_with(".localhost") || IsLoopbackIpv4(h) || h == "::1" ||
         h == "[::1]";
}

HostGuard::HostGuard(std::string_view listen_host, std::vector<std::string> allowed_hosts)
    : enabled_(IsLoopbackHost(listen_host)) {
  for (const std::string& host : allowed_hosts) {
    if (host == "*") enabled_ = false;
    allowed_.push_back(Lower(host));
  }
}

bool HostGuard::Allows(const Request& request) const {
  if (!enabled_) return true;
  auto header = request.header("host");
  if (!header) return true;  // HTTP/1.0 without Host: not a browser
  const std::string host = Lower(StripPort(*header));
  if (IsLoopbackHost(host)) return true;
  return std::find(allowed_.begin(), allowed_.end(), host) != allowed_.end();
}

}  // namespace radixserve::http

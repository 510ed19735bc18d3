// A tiny blocking HTTP/1.1 client over POSIX sockets for the http unit tests. It parses just
// enough (status line, headers, Content-Length and chunked bodies) and never hangs: every receive
// has a generous timeout, after which the call reports failure.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace radixserve::http::testing {

struct TestResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;

  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class TestConnection {
 public:
  explicit TestConnection(uint16_t port, int receive_buffer = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) return;
    timeval tv{30, 0};  // only to avoid hanging forever
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (receive_buffer > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~TestConnection() { Close(); }
  TestConnection(const TestConnection&) = delete;
  TestConnection& operator=(const TestConnection&) = delete;

  bool ok() const { return fd_ >= 0; }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Status line and headers only.
  std::optional<TestResponse> ReadHead() {
    std::size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return std::nullopt;
    }
    std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    TestResponse r;
    std::size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12) return std::nullopt;
    r.status = std::stoi(status_line.substr(9, 3));
    std::size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      std::size_t next = head.find("\r\n", pos);
      if (next == std::string::npos) next = head.size();
      std::string line = head.substr(pos, next - pos);
      std::size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      r.headers[name] = line.substr(v);
      pos = next + 2;
    }
    return r;
  }

  // A whole response; `head_request` skips the body.
  std::optional<TestResponse> ReadResponse(bool head_request = false) {
    auto r = ReadHead();
    if (!r || head_request) return r;
    if (r->header("transfer-encoding") == "chunked") {
      while (true) {
        auto chunk = ReadChunk();
        if (!chunk) return std::nullopt;
        if (chunk->empty()) break;
        r->body += *chunk;
      }
    } else if (!r->header("content-length").empty()) {
      std::size_t length = std::stoul(r->header("content-length"));
      if (!ReadExactly(length, &r->body)) return std::nullopt;
    } else {
      while (Fill()) {
      }
      r->body = std::move(buf_);
      buf_.clear();
    }
    return r;
  }

  // The next chunk of a chunked body; "" for the last chunk (trailers skipped).
  std::optional<std::string> ReadChunk() {
    std::size_t eol;
    while ((eol = buf_.find("\r\n")) == std::string::npos) {
      if (!Fill()) return std::nullopt;
    }
    std::size_t size = std::stoul(buf_.substr(0, eol), nullptr, 16);
    buf_.erase(0, eol + 2);
    std::string data;
    if (!ReadExactly(size, &data)) return std::nullopt;
    std::string crlf;
    if (!ReadExactly(2, &crlf) || crlf != "\r\n") return std::nullopt;
    return data;
  }

  // True once the server closed the connection (EOF or reset), false on timeout.
  bool WaitClosed() {
    char tmp[4096];
    while (true) {
      ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  bool Fill() {
    char tmp[16384];
    ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<std::size_t>(n));
    return true;
  }
  bool ReadExactly(std::size_t n, std::string* out) {
    while (buf_.size() < n) {
      if (!Fill()) return false;
    }
    out->append(buf_, 0, n);
    buf_.erase(0, n);
    return true;
  }

  int fd_ = -1;
  std::string buf_;
};

inline std::string MakeRequest(std::string_view method, std::string_view target,
                               std::string_view body = {}, std::string_view extra_headers = {}) {
  std::string r =
      std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  r += extra_headers;
  if (!body.empty() || method == "POST") {
    r +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  r += "\r\n";
  r += body;
  return r;
}

}  // namespace radixserve::http::testing

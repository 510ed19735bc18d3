#include "dist/tcp_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <gloo/common/error.h>

namespace radixserve::dist {
namespace {

using Clock = std::chrono::steady_clock;

Expected<sockaddr_in> Resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0 || found == nullptr) {
    return Unavailable("cannot resolve host '" + host + "': " + gai_strerror(rc));
  }
  sockaddr_in addr = *reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  freeaddrinfo(found);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

// Whole reads and writes; false on EOF or an error.
bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteBytes(int fd, const char* data, size_t n) {
  const auto len = static_cast<uint32_t>(n);
  return WriteAll(fd, &len, sizeof(len)) && WriteAll(fd, data, n);
}

bool ReadBytes(int fd, std::vector<char>* out) {
  uint32_t len = 0;
  if (!ReadAll(fd, &len, sizeof(len)) || len > (64u << 20)) return false;
  out->resize(len);
  return ReadAll(fd, out->data(), len);
}

}  // namespace

Expected<std::pair<std::string, int>> ParseHostPort(const std::string& text,
                                                    const std::string& what) {
  const size_t colon = text.rfind(':');
  const auto bad = [&] {
    return InvalidArgument("argument " + what + ": expected host:port, got '" + text + "'");
  };
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return bad();
  int port = 0;
  for (size_t i = colon + 1; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9' || port > 65535) return bad();
    port = port * 10 + (text[i] - '0');
  }
  if (port > 65535) return bad();
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host, port);
}

Expected<std::string> LocalAddressToward(const std::string& host, int port) {
  sockaddr_in peer{};
  RADIX_ASSIGN_OR_RETURN(peer, Resolve(host, port == 0 ? 9 : port));
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return Unavailable(std::string("socket: ") + std::strerror(errno));
  sockaddr_in self{};
  socklen_t len = sizeof(self);
  const bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&peer), sizeof(peer)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0;
  const int err = errno;
  close(fd);
  if (!ok) return Unavailable("no route to " + host + ": " + std::strerror(err));
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &self.sin_addr, text, sizeof(text));
  return std::string(text);
}

Expected<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host, int port) {
  sockaddr_in addr{};
  RADIX_ASSIGN_OR_RETURN(addr, Resolve(host, port));
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 64) != 0) {
    const int err = errno;
    close(fd);
    return Unavailable("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                       std::strerror(err));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(fd, ntohs(addr.sin_port)));
}

TcpStoreServer::TcpStoreServer(int listen_fd, int port)
    : listen_fd_(listen_fd), port_(port), acceptor_([this] { AcceptLoop(); }) {}

TcpStoreServer::~TcpStoreServer() {
  stop_ = true;
  acceptor_.join();
  close(listen_fd_);
  std::vector<std::thread> connections;
  {
    std::lock_guard<std::mutex> lock(mu_);
    connections.swap(connections_);
  }
  for (std::thread& t : connections) t.join();
}

void TcpStoreServer::AcceptLoop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    connections_.emplace_back([this, fd] { Serve(fd); });
  }
}

void TcpStoreServer::Serve(int fd) {
  while (!stop_) {
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, 100);
    if (ready == 0) continue;
    char op = 0;
    std::vector<char> key, value;
    if (ready < 0 || !ReadAll(fd, &op, 1) || !ReadBytes(fd, &key)) break;
    const std::string k(key.begin(), key.end());
    if (op == 'S') {
      if (!ReadBytes(fd, &value)) break;
      {
        std::lock_guard<std::mutex> lock(mu_);
        values_[k] = std::move(value);
      }
      const char done = 1;
      if (!WriteAll(fd, &done, 1)) break;
    } else if (op == 'G') {
      bool found = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = values_.find(k); it != values_.end()) {
          found = true;
          value = it->second;
        }
      }
      const char flag = found ? 1 : 0;
      if (!WriteAll(fd, &flag, 1) || (found && !WriteBytes(fd, value.data(), value.size()))) {
        break;
      }
    } else {
      break;
    }
  }
  close(fd);
}

Expected<std::unique_ptr<TcpStore>> TcpStore::Connect(const std::string& host, int port,
                                                      std::chrono::milliseconds timeout) {
  sockaddr_in addr{};
  RADIX_ASSIGN_OR_RETURN(addr, Resolve(host, port));
  const auto deadline = Clock::now() + timeout;
  std::string last_error;
  while (true) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Unavailable(std::string("socket: ") + std::strerror(errno));
    if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return std::unique_ptr<TcpStore>(new TcpStore(fd, timeout));
    }
    last_error = std::strerror(errno);
    close(fd);
    if (Clock::now() >= deadline) {
      return Unavailable("cannot reach the rendezvous store at " + host + ":" +
                         std::to_string(port) + " within " +
                         std::to_string(timeout.count() / 1000) + " s: " + last_error);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

TcpStore::~TcpStore() { close(fd_); }

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
  const char op = 'S';
  char done = 0;
  if (!WriteAll(fd_, &op, 1) || !WriteBytes(fd_, key.data(), key.size()) ||
      !WriteBytes(fd_, data.data(), data.size()) || !ReadAll(fd_, &done, 1)) {
    throw ::gloo::IoException("the rendezvous store closed the connection (set " + key + ")");
  }
}

bool TcpStore::TryGet(const std::string& key, std::vector<char>* value) {
  const char op = 'G';
  char found = 0;
  if (!WriteAll(fd_, &op, 1) || !WriteBytes(fd_, key.data(), key.size()) ||
      !ReadAll(fd_, &found, 1) || (found != 0 && !ReadBytes(fd_, value))) {
    throw ::gloo::IoException("the rendezvous store closed the connection (get " + key + ")");
  }
  return found != 0;
}

std::vector<char> TcpStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::vector<char> value;
  TryGet(key, &value);
  return value;
}

void TcpStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TcpStore::wait(const std::vector<std::string>& keys,
                    const std::chrono::milliseconds& timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<char> ignored;
  for (const std::string& key : keys) {
    while (!TryGet(key, &ignored)) {
      if (Clock::now() >= deadline) {
        throw ::gloo::IoException("timed out after " + std::to_string(timeout.count() / 1000) +
                                  " s waiting for rendezvous key " + key +
                                  " (a rank did not start or cannot reach --dist-init-addr)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace radixserve::dist

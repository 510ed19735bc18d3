// TcpStore: the key/value store gloo's rendezvous reads and writes (gloo::rendezvous::Store), over
// TCP, for ranks on several machines. Global rank 0 runs a TcpStoreServer at --dist-init-addr
// (SGLang hosts torch's TCPStore there); every rank, rank 0 included, is a TcpStore client of it.
// Gloo only exchanges each rank's listening address through it, once, at start.
//
// Wire format (both directions, integers little-endian u32): a request is an op byte ('S' set, 'G'
// get), the key's length and bytes, and for 'S' the value's length and bytes. 'S' answers one
// byte 1; 'G' answers 0 (no such key yet) or 1 followed by the value's length and bytes. Clients
// wait for a key by asking again every few milliseconds, until their timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "common/status.h"

namespace radixserve::dist {

// host:port -> (host, port); InvalidArgument naming `what` for anything else.
Expected<std::pair<std::string, int>> ParseHostPort(const std::string& text,
                                                    const std::string& what);

// The local IPv4 address this machine uses to reach host:port (a connected UDP socket's own
// address; nothing is sent): the address the other ranks can reach this one at.
Expected<std::string> LocalAddressToward(const std::string& host, int port);

class TcpStoreServer {
 public:
  // Listens on host:port (port 0: any free port, see port()).
  static Expected<std::unique_ptr<TcpStoreServer>> Start(const std::string& host, int port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }

 private:
  TcpStoreServer(int listen_fd, int port);
  void AcceptLoop();
  void Serve(int fd);

  int listen_fd_;
  int port_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::map<std::string, std::vector<char>> values_;
  std::vector<std::thread> connections_;  // guarded by mu_
  std::thread acceptor_;
};

class TcpStore : public gloo::rendezvous::Store {
 public:
  // Connects to the server, retrying until `timeout` (the server's machine may start later).
  static Expected<std::unique_ptr<TcpStore>> Connect(const std::string& host, int port,
                                                     std::chrono::milliseconds timeout);
  ~TcpStore() override;

  // gloo::rendezvous::Store; failures throw gloo::IoException as gloo's own stores do.
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  TcpStore(int fd, std::chrono::milliseconds timeout) : fd_(fd), timeout_(timeout) {}
  // The value of `key`, or false when the server has none yet.
  bool TryGet(const std::string& key, std::vector<char>* value);

  int fd_;
  std::chrono::milliseconds timeout_;
};

}  // namespace radixserve::dist

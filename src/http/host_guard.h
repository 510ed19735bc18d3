// HostGuard: a defence against DNS rebinding. A server that listens only on a loopback address is
// meant for this machine; a web page on evil.example can still make the browser send requests to
// it by pointing its own name at 127.0.0.1, but those requests carry "Host: evil.example". When
// the server listens on loopback, only Host values naming the loopback (localhost, *.localhost,
// 127.0.0.1, [::1], any port) or listed in --allowed-hosts pass; others get 403. Listening on
// any other address disables the guard (the operator chose to be reachable by name).
//
// Immutable after construction; safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "http/request.h"

namespace radixserve::http {

class HostGuard {
 public:
  // `listen_host`: the address the server binds (--host). `allowed_hosts`: extra host names
  // (without port); "*" disables the guard.
  HostGuard(std::string_view listen_host, std::vector<std::string> allowed_hosts);

  bool enabled() const { return enabled_; }
  bool Allows(const Request& request) const;

 private:
  bool enabled_ = false;
  std::vector<std::string> allowed_;  // lower-case host names
};

// True for addresses and names that only this machine can reach (127.0.0.0/8, ::1, localhost).
bool IsLoopbackHost(std::string_view host);

}  // namespace radixserve::http

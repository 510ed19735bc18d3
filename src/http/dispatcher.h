// Dispatcher: what happens to a parsed request before a handler sees it: Host checked against
// DNS rebinding (403), then in SGLang's order CORS preflight answered, API key (or admin key)
// checked (401 {"error":"Unauthorized"}), route looked up (404 / 405 with an OpenAI-shaped body),
// handler run with exceptions turned into 500. CORS headers go on every response to a request
// whose Origin the policy allows.
//
// Immutable after construction; Dispatch runs on the connection's I/O thread.
#pragma once

#include "http/api_key.h"
#include "http/cors.h"
#include "http/host_guard.h"
#include "http/request.h"
#include "http/responder.h"
#include "http/router.h"
#include "http/server_options.h"

namespace radixserve::http {

class Dispatcher {
 public:
  // `on_response`: ServerOptions::on_response (may be empty).
  Dispatcher(Router router, ApiKeyCheck api_key,
             std::function<void(const ResponseInfo&)> on_response = {},
             CorsPolicy cors = CorsPolicy(), HostGuard host_guard = HostGuard("0.0.0.0", {}));

  void Dispatch(Request request, ResponderPtr responder) const;

 private:
  Router router_;
  ApiKeyCheck api_key_;
  CorsPolicy cors_;
  HostGuard host_guard_;
  std::function<void(const ResponseInfo&)> on_response_;
};

}  // namespace radixserve::http

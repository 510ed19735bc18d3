// Dispatcher: what happens to a parsed request before a handler sees it, in SGLang's order:
// CORS preflight answered, API key checked (401 {"error":"Unauthorized"}), route looked up
// (404 / 405 with an OpenAI-shaped body), handler run with exceptions turned into 500. CORS
// headers go on every response to a request that carries Origin.
//
// Immutable after construction; Dispatch runs on the connection's I/O thread.
#pragma once

#include "http/api_key.h"
#include "http/request.h"
#include "http/responder.h"
#include "http/router.h"
#include "http/server_options.h"

namespace radixserve::http {

class Dispatcher {
 public:
  // `on_response`: ServerOptions::on_response (may be empty).
  Dispatcher(Router router, ApiKeyCheck api_key,
             std::function<void(const ResponseInfo&)> on_response = {});

  void Dispatch(Request request, ResponderPtr responder) const;

 private:
  Router router_;
  ApiKeyCheck api_key_;
  std::function<void(const ResponseInfo&)> on_response_;
};

}  // namespace radixserve::http

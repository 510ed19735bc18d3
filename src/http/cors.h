// CORS as SGLang configures Starlette's CORSMiddleware: allow_origins=["*"],
// allow_credentials=True, allow_methods=["*"], allow_headers=["*"]. Pure functions of the request.
//  - Preflight = OPTIONS with both Origin and Access-Control-Request-Method: answered directly,
//    200 "OK" (400 "Disallowed CORS method" for a method outside the list), echoing the origin
//    and the requested headers, Max-Age 600.
//  - Any other request carrying Origin gets Access-Control-Allow-Origin "*" and
//    Allow-Credentials "true"; with a Cookie header the origin is echoed instead (plus Vary).
#pragma once

#include "http/request.h"

namespace radixserve::http {

bool IsCorsPreflight(const Request& request);

struct PreflightAnswer {
  int status = 200;
  std::string body;  // text/plain
  HeaderList headers;
};
PreflightAnswer AnswerCorsPreflight(const Request& request);

// Headers to add to every response to a non-preflight request (empty without Origin).
HeaderList CorsResponseHeaders(const Request& request);

}  // namespace radixserve::http

// CorsPolicy: which browser origins may read responses. SGLang configures Starlette's
// CORSMiddleware with allow_origins=["*"] and allow_credentials=True, which echoes any origin
// back with credentials allowed - any web page could then act with the visitor's cookies. Here
// the origins come from --allowed-origins:
//  - "*" (the default): any origin, as "Access-Control-Allow-Origin: *" without credentials
//    (browsers then send no cookies; API keys travel in the Authorization header anyway);
//  - a listed origin ("https://app.example"): echoed back with credentials allowed and
//    "Vary: Origin";
//  - any other origin: no CORS headers (the browser blocks the read); its preflight gets 400.
// Preflight = OPTIONS with Origin and Access-Control-Request-Method: answered directly, 200 "OK"
// (400 "Disallowed CORS method" for a method outside the list), echoing the requested headers,
// Max-Age 600.
//
// Immutable after construction; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "http/request.h"

namespace radixserve::http {

bool IsCorsPreflight(const Request& request);

struct PreflightAnswer {
  int status = 200;
  std::string body;  // text/plain
  HeaderList headers;
};

class CorsPolicy {
 public:
  // `allowed_origins`: exact origins, or "*" for any (without credentials).
  explicit CorsPolicy(std::vector<std::string> allowed_origins = {"*"});

  PreflightAnswer AnswerPreflight(const Request& request) const;
  // Headers to add to every response to a non-preflight request (empty without an allowed
  // Origin).
  HeaderList ResponseHeaders(const Request& request) const;

 private:
  // The Allow-Origin/Credentials/Vary headers for `origin`; empty when it is not allowed.
  HeaderList OriginHeaders(const std::string& origin) const;

  std::vector<std::string> listed_;
  bool any_ = false;
};

}  // namespace radixserve::http

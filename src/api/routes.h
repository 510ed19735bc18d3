// Every API route radixserve serves, as data: method, path, handler. The HTTP server (src/http)
// registers them; handlers never see HTTP details beyond ApiRequest and answer through a
// ResponseWriter.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "api/response_writer.h"
#include "api/server_context.h"

namespace radixserve::api {

struct ApiRequest {
  std::string method;        // "GET", "POST", ...
  std::string path;          // without the query string
  std::string path_param;    // the {model} part of /v1/models/{model}; empty otherwise
  std::string content_type;  // the Content-Type header, lower-cased, parameters stripped
  std::string body;
  // Decoded query parameters ('+' is a space); the first of repeated names.
  std::map<std::string, std::string> query;
};

using ApiHandler = std::function<void(ServerContext&, const ApiRequest&, ResponseWriterPtr)>;

struct ApiRoute {
  std::vector<std::string> methods;
  std::string path;     // exact path, or a prefix ending in '/' when `prefix` is set
  bool prefix = false;  // path_param = the rest of the path
  ApiHandler handler;
  std::string param_name = "path";  // names path_param in metrics labels ("/v1/models/{model}")
  // Administrative routes (cache flush, aborts by rid prefix) need --admin-api-key when it is set.
  bool admin = false;
};

// The route table (native API, OpenAI API, admin routes, /metrics).
std::vector<ApiRoute> ApiRoutes();

}  // namespace radixserve::api

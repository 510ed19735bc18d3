// Router: maps (method, path) to a handler. Routes are exact paths ("/v1/models") or prefixes
// ("/v1/models/" matches "/v1/models/<anything non-empty>", the rest becoming path_param).
// Exact routes win over prefixes; among prefixes the longest wins. HEAD falls back to the GET
// handler (as Starlette does); the server then drops the body.
//
// Built once before the server starts, then read concurrently by I/O threads (no mutation after
// HttpServer::Start).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/request.h"
#include "http/responder.h"

namespace radixserve::http {

// Runs on an I/O thread; must not block. `request` is valid only during the call (copy what
// outlives it). Answers through `responder`, now or later, from any thread. An exception
// escaping a handler becomes a 500 response.
using Handler = std::function<void(const Request& request, ResponderPtr responder)>;

enum class RouteMatchKind { kFound, kNotFound, kMethodNotAllowed };

// Who may call a route: anyone with the API key, or only with the admin key when one is set.
enum class RouteAccess { kUser, kAdmin };

struct RouteMatch {
  RouteMatchKind kind = RouteMatchKind::kNotFound;
  const Handler* handler = nullptr;  // set when kFound; owned by the Router
  // The route as declared, for metrics labels: the exact path, or the prefix followed by
  // "{<param name>}" ("/v1/models/{model}"). Set when kFound.
  std::string route_path;
  std::string path_param;  // the rest of the path for a prefix route
  RouteAccess access = RouteAccess::kUser;
  std::vector<std::string> allowed;  // methods the path supports, when kMethodNotAllowed
};

class Router {
 public:
  // `methods` are upper-case ("GET", "POST"). Registering the same method twice for one path is a
  // programmer error (RADIX_CHECK).
  void Add(std::vector<std::string> methods, std::string path, Handler handler,
           RouteAccess access = RouteAccess::kUser);
  // `prefix` must end with '/'. `param_name` only names the parameter in RouteMatch::route_path.
  void AddPrefix(std::vector<std::string> methods, std::string prefix, Handler handler,
                 std::string param_name = "path", RouteAccess access = RouteAccess::kUser);

  RouteMatch Match(std::string_view method, std::string_view path) const;

 private:
  struct Route {
    std::vector<std::string> methods;
    std::string path;
    bool prefix = false;
    Handler handler;
    std::string param_name;
    RouteAccess access = RouteAccess::kUser;
  };
  void AddRoute(Route route);

  std::vector<Route> routes_;
};

}  // namespace radixserve::http

#include "http/router.h"

#include <algorithm>

#include "common/check.h"

namespace radixserve::http {
namespace {

bool Contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

void Router::Add(std::vector<std::string> methods, std::string path, Handler handler,
                 RouteAccess access) {
  AddRoute({std::move(methods), std::move(path), false, std::move(handler), "", access});
}

void Router::AddPrefix(std::vector<std::string> methods, std::string prefix, Handler handler,
                       std::string param_name, RouteAccess access) {
  RADIX_CHECK_MSG(!prefix.empty() && prefix.back() == '/', "route prefix must end with '/'");
  AddRoute({std::move(methods), std::move(prefix), true, std::move(handler), std::move(param_name),
            access});
}

void Router::AddRoute(Route route) {
  RADIX_CHECK(route.handler != nullptr);
  RADIX_CHECK(!route.methods.empty());
  for (const Route& other : routes_) {
    if (other.path != route.path || other.prefix != route.prefix) continue;
    for (const std::string& m : route.methods) {
      RADIX_CHECK_MSG(!Contains(other.methods, m), "duplicate route");
    }
  }
  routes_.push_back(std::move(route));
}

RouteMatch Router::Match(std::string_view method, std::string_view path) const {
  // Candidates for this path: all exact routes with the path, else the longest matching prefix.
  std::vector<const Route*> candidates;
  for (const Route& r : routes_) {
    if (!r.prefix && r.path == path) candidates.push_back(&r);
  }
  std::string param;
  if (candidates.empty()) {
    std::size_t best = 0;
    for (const Route& r : routes_) {
      if (!r.prefix || path.size() <= r.path.size() || !path.starts_with(r.path)) continue;
      if (r.path.size() > best) {
        best = r.path.size();
        candidates.clear();
      }
      if (r.path.size() == best) candidates.push_back(&r);
    }
    if (!candidates.empty()) param = std::string(path.substr(best));
  }

  RouteMatch match;
  if (candidates.empty()) return match;
  for (std::string_view wanted : {method, method == "HEAD" ? std::string_view("GET") : method}) {
    for (const Route* r : candidates) {
      if (Contains(r->methods, wanted)) {
        match.kind = RouteMatchKind::kFound;
        match.handler = &r->handler;
        match.path_param = std::move(param);
        match.access = r->access;
        match.route_path = r->prefix ? r->path + "{" + r->param_name + "}" : r->path;
        return match;
      }
    }
  }
  match.kind = RouteMatchKind::kMethodNotAllowed;
  for (const Route* r : candidates) {
    for (const std::string& m : r->methods) {
      if (!Contains(match.allowed, m)) match.allowed.push_back(m);
    }
  }
  return match;
}

}  // namespace radixserve::http

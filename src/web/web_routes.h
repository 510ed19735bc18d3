// Routes of the built-in chat page: GET / answers index.html and GET /static/<name> any other
// embedded file (HEAD works through the router's fallback). Unknown names get 404 with the
// OpenAI-shaped error body. Responses carry a Content-Security-Policy that allows only the page's
// own scripts, styles and API calls (same origin), so nothing is fetched from the network.
//
// The page's API calls go through the normal API routes and so through --api-key; the page
// itself must be reachable without a key (the HTTP layer's API-key check exempts "/" and
// "/static/").
#pragma once

#include "http/router.h"

namespace radixserve::web {

inline constexpr std::string_view kIndexPath = "/";
inline constexpr std::string_view kStaticPrefix = "/static/";

// Registers the page routes on `router`. Call once, before the server starts.
void AddWebRoutes(http::Router& router);

}  // namespace radixserve::web

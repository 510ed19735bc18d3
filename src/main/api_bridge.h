// Connects the API layer to the HTTP server: every api::ApiRoute becomes an http::Router route
// whose handler sees an api::ApiRequest and answers through the connection's http::Responder (an
// api::ResponseWriter).
#pragma once

#include "api/server_context.h"
#include "http/router.h"

namespace radixserve {

http::Router BuildRouter(api::ServerContext& ctx);

}  // namespace radixserve

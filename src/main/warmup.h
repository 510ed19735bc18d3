// The startup warmup (SGLang runs one request before declaring the server ready, unless
// --skip-server-warmup): a short greedy generation through the engine.
#pragma once

#include <cstdint>

#include "api/server_context.h"
#include "common/status.h"

namespace radixserve {

// Blocks until the warmup request finishes. An error means the engine could not generate.
Status RunWarmup(api::ServerContext& ctx);

}  // namespace radixserve

// Native admin and utility routes: /health, /health_generate, /model_info, /server_info,
// /get_load, /flush_cache, /abort_request, /tokenize, /detokenize, /v1/models.
#pragma once

#include <string>

#include "api/routes.h"

namespace radixserve::api {

void HandleHealth(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
void HandleHealthGenerate(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
void HandleModelInfo(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
void HandleServerInfo(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
void HandleGetLoad(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
// LightLLM's GET /token_load (KV pool shares, per data-parallel replica).
void HandleTokenLoad(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
void HandleFlushCache(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
void HandleClearHiCacheStorage(ServerContext& ctx, const ApiRequest& request,
                               ResponseWriterPtr writer);
void HandleAbortRequest(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
void HandleTokenize(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
void HandleDetokenize(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
void HandleListModels(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
void HandleMetrics(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
// The /metrics text: the scheduler-side gauges are read from the engine, then the whole
// exposition (ctx.metrics must be set). Thread-safe; also what --metric_gateway pushes.
std::string ScrapeMetrics(ServerContext& ctx);
void HandleGetModel(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);

}  // namespace radixserve::api

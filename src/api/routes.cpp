#include "api/routes.h"

#include "api/admin_api.h"
#include "api/api_error.h"
#include "api/control_api.h"
#include "api/embeddings_api.h"
#include "api/generate_api.h"
#include "api/json_body.h"
#include "api/lightllm_api.h"
#include "api/lora_api.h"
#include "api/openai_api.h"
#include "api/openai_responses.h"
#include "api/parse_api.h"
#include "api/rerank_api.h"
#include "api/rtp_llm_api.h"
#include "api/score_api.h"

namespace radixserve::api {
namespace {

// OpenAI routes take JSON bodies only (SGLang answers 400 otherwise).
ApiHandler JsonOnly(void (*handle)(ServerContext&, const std::string&, ResponseWriterPtr)) {
  return [handle](ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer) {
    if (request.content_type != "application/json") {
      ApiError error{
          400, "Unsupported Media Type: Only 'application/json' is allowed", "BadRequestError", {}};
      writer->Send(400, "application/json", ToJsonText(error.OpenAiBody()));
      return;
    }
    handle(ctx, request.body, std::move(writer));
  };
}

ApiHandler BodyOnly(void (*handle)(ServerContext&, const std::string&, ResponseWriterPtr)) {
  return [handle](ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer) {
    handle(ctx, request.body, std::move(writer));
  };
}

// Routes that start generations refuse new work with 503 once a graceful shutdown has begun
// (requests in flight keep running for --shutdown-grace-period).
ApiHandler Admitting(ApiHandler handle) {
  return [handle = std::move(handle)](ServerContext& ctx, const ApiRequest& request,
                                      ResponseWriterPtr writer) {
    if (ctx.shutting_down) {
      ApiError error{503, "The server is shutting down.", "ServiceUnavailableError", {}};
      writer->Send(503, "application/json", ToJsonText(error.OpenAiBody()));
      return;
    }
    handle(ctx, request, std::move(writer));
  };
}

// Generation routes answer 400 naming --is-embedding on an embedding server.
ApiHandler Generating(ApiHandler handle) {
  return [handle = std::move(handle)](ServerContext& ctx, const ApiRequest& request,
                                      ResponseWriterPtr writer) {
    if (!ctx.model.is_generation) {
      writer->Send(400, "application/json", ToJsonText(WrongServerKind(true).OpenAiBody()));
      return;
    }
    handle(ctx, request, std::move(writer));
  };
}

// POST / is LightLLM's compat route and RTP-LLM's generation route: a body with "prompt" or
// "prompt_batch" (and no "inputs") is RTP-LLM's; everything else is answered as before.
void HandleRoot(ServerContext& ctx, const std::string& body_text, ResponseWriterPtr writer) {
  ApiExpected<nlohmann::json> body = ParseJsonObjectBody(body_text);
  if (body.ok() && IsRtpLlmBody(*body)) return ServeRtpLlm(ctx, *body, std::move(writer));
  HandleLightLlmCompat(ctx, body_text, std::move(writer));
}

}  // namespace

std::vector<ApiRoute> ApiRoutes() {
  return {
      {{"GET"}, "/health", false, HandleHealth},
      {{"GET"}, "/health_generate", false, HandleHealthGenerate},
      {{"GET"}, "/model_info", false, HandleModelInfo},
      {{"GET"}, "/get_model_info", false, HandleModelInfo},
      {{"GET"}, "/server_info", false, HandleServerInfo},
      {{"GET"}, "/get_server_info", false, HandleServerInfo},
      {{"GET"}, "/get_load", false, HandleGetLoad},
      {{"GET"}, "/token_load", false, HandleTokenLoad},
      {{"GET", "POST"}, "/flush_cache", false, HandleFlushCache, "path", /*admin=*/true},
      {{"GET", "POST"},
       "/clear_hicache_storage_backend",
       false,
       HandleClearHiCacheStorage,
       "path",
       /*admin=*/true},
      {{"POST"},
       "/hicache/storage-backend/clear",
       false,
       HandleClearHiCacheStorage,
       "path",
       /*admin=*/true},
      {{"POST"}, "/abort_request", false, HandleAbortRequest, "path", /*admin=*/true},
      {{"POST"}, "/load_lora_adapter", false, HandleLoadLoraAdapter, "path", /*admin=*/true},
      {{"POST"}, "/unload_lora_adapter", false, HandleUnloadLoraAdapter, "path", /*admin=*/true},
      {{"POST"}, "/pause_generation", false, HandlePauseGeneration, "path", /*admin=*/true},
      {{"POST"}, "/continue_generation", false, HandleContinueGeneration, "path", /*admin=*/true},
      {{"POST"},
       "/update_weight_version",
       false,
       HandleUpdateWeightVersion,
       "path",
       /*admin=*/true},
      {{"POST"},
       "/update_weights_from_disk",
       false,
       HandleUpdateWeightsFromDisk,
       "path",
       /*admin=*/true},
      {{"GET", "POST"},
       "/get_weights_by_name",
       false,
       HandleGetWeightsByName,
       "path",
       /*admin=*/true},
      {{"GET", "POST"},
       "/release_memory_occupation",
       false,
       HandleReleaseMemoryOccupation,
       "path",
       /*admin=*/true},
      {{"GET", "POST"},
       "/resume_memory_occupation",
       false,
       HandleResumeMemoryOccupation,
       "path",
       /*admin=*/true},
      {{"GET", "POST"},
       "/configure_logging",
       false,
       HandleConfigureLogging,
       "path",
       /*admin=*/true},
      {{"GET", "POST"}, "/start_profile", false, HandleStartProfile, "path", /*admin=*/true},
      {{"GET", "POST"}, "/stop_profile", false, HandleStopProfile, "path", /*admin=*/true},
      {{"GET", "POST"},
       "/start_expert_distribution_record",
       false,
       HandleStartExpertRecord,
       "path",
       /*admin=*/true},
      {{"GET", "POST"},
       "/stop_expert_distribution_record",
       false,
       HandleStopExpertRecord,
       "path",
       /*admin=*/true},
      {{"GET", "POST"},
       "/dump_expert_distribution_record",
       false,
       HandleDumpExpertRecord,
       "path",
       /*admin=*/true},
      {{"POST", "PUT"},
       "/set_internal_state",
       false,
       HandleSetInternalState,
       "path",
       /*admin=*/true},
      {{"GET", "POST"}, "/open_session", false, HandleOpenSession},
      {{"GET", "POST"}, "/close_session", false, HandleCloseSession},
      {{"POST", "PUT"}, "/generate", false, Generating(Admitting(BodyOnly(HandleGenerate)))},
      {{"POST"},
       "/generate_stream",
       false,
       Generating(Admitting(BodyOnly(HandleLightLlmGenerateStream)))},
      {{"POST"}, "/", false, Generating(Admitting(BodyOnly(HandleRoot)))},
      {{"POST"}, "/tokenize", false, HandleTokenize},
      {{"POST"}, "/v1/tokenize", false, HandleTokenize},
      {{"POST"}, "/detokenize", false, HandleDetokenize},
      {{"POST"}, "/v1/detokenize", false, HandleDetokenize},
      {{"POST"}, "/v1/completions", false, Generating(Admitting(JsonOnly(HandleCompletions)))},
      {{"POST"},
       "/v1/chat/completions",
       false,
       Generating(Admitting(JsonOnly(HandleChatCompletions)))},
      {{"POST"}, "/v1/responses", false, Generating(Admitting(JsonOnly(HandleResponses)))},
      {{"GET", "DELETE", "POST"}, "/v1/responses/", true, HandleResponseById, "response_id"},
      {{"POST"}, "/v1/score", false, Admitting(JsonOnly(HandleScore))},
      {{"POST", "PUT"}, "/v1/rerank", false, Admitting(JsonOnly(HandleRerank))},
      {{"POST"}, "/v1/embeddings", false, Admitting(JsonOnly(HandleEmbeddings))},
      {{"POST"}, "/encode", false, Admitting(BodyOnly(HandleEncode))},
      {{"POST", "PUT"}, "/classify", false, Admitting(BodyOnly(HandleClassify))},
      {{"POST"}, "/v1/classify", false, Admitting(JsonOnly(HandleV1Classify))},
      {{"POST"}, "/get_score", false, Admitting(BodyOnly(HandleGetScore))},
      // SageMaker's contract, as SGLang serves it: /ping is the health check, /invocations the
      // OpenAI chat route.
      {{"GET"}, "/ping", false, HandleHealth},
      {{"POST"}, "/invocations", false, Generating(Admitting(JsonOnly(HandleChatCompletions)))},
      {{"POST"}, "/parse_function_call", false, HandleParseFunctionCall},
      {{"POST"}, "/separate_reasoning", false, HandleSeparateReasoning},
      {{"GET"}, "/metrics", false, HandleMetrics},
      {{"GET"}, "/v1/models", false, HandleListModels},
      {{"GET"}, "/v1/models/", true, HandleGetModel, "model"},
  };
}

}  // namespace radixserve::api

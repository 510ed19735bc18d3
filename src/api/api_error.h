// The one place that turns a failure into an HTTP status and a JSON error body.
//
// Two body shapes exist, as in SGLang: OpenAI routes (and request-validation failures anywhere)
// answer {"object":"error","message":...,"type":...,"param":null,"code":N}; the native
// /generate answers engine ValueErrors with {"error":{"message":...}}.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace radixserve::api {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "BadRequestError";  // OpenAI error type
  std::string param;                     // empty: null

  // Inline: the HTTP server's own errors (malformed requests, unknown routes) use it too.
  nlohmann::json OpenAiBody() const {
    return {{"object", "error"},
            {"message", message},
            {"type", type},
            {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
            {"code", status}};
  }
  nlohmann::json NativeBody() const;  // {"error": {"message": ...}}
};

// Status code -> HTTP: invalid argument / unsupported 400, not found 404, resource exhausted 503,
// everything else 500 ("Internal server error: ...").
ApiError FromStatus(const Status& status);

// Serializes a response body. Token text may hold partial UTF-8 sequences; they are replaced by
// U+FFFD instead of throwing.
inline std::string ToJsonText(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline ApiError BadRequest(std::string message, std::string type = "BadRequestError") {
  return {400, std::move(message), std::move(type), {}};
}

// A request-schema failure (a field of the wrong type or shape): 400 with SGLang's type
// "Bad Request", answered in the OpenAI shape on every route.
inline ApiError InvalidRequest(std::string message) {
  return {400, std::move(message), "Bad Request", {}};
}

// A value or the error to answer with.
template <typename T>
using ApiExpected = Expected<T, ApiError>;

// How a route shapes its error bodies. kOpenAi: always the OpenAI body. kNative (/generate, as
// SGLang): schema failures in the OpenAI body, other 400s as {"error": {"message": ...}}, the
// rest in the OpenAI body. kLightLlm: {"message": ...} (LightLLM's create_error_response). kTgi:
// {"error": ..., "error_type": ...} (Text Generation Inference's ErrorResponse). kRtpLlm:
// {"error_code": N, "error_code_str": "N_NAME", "message": ...} (RTP-LLM's format_exception); N
// is RTP-LLM's ExceptionType named by the error's `type` when it is one (RtpLlmError), else
// derived from the status (400: 507 ERROR_INPUT_FORMAT_ERROR, 503: 409 CONCURRENCY_LIMIT_ERROR,
// 499: CANCELLED_ERROR, other: 514 UNKNOWN_ERROR).
enum class ErrorStyle { kOpenAi, kNative, kLightLlm, kTgi, kRtpLlm };

// A 400 carrying one of RTP-LLM's ExceptionType names (ERROR_INPUT_FORMAT_ERROR,
// NO_PROMPT_ERROR, ERROR_GENERATE_CONFIG_FORMAT, INVALID_PARAMS, UNSUPPORTED_OPERATION) as its
// type, for ErrorStyle::kRtpLlm.
inline ApiError RtpLlmError(std::string message, std::string exception_type) {
  return {400, std::move(message), std::move(exception_type), {}};
}

// The body of a plain (non-streamed) error answer.
nlohmann::json ErrorBody(ErrorStyle style, const ApiError& error);
// The data of the SSE event that reports an error inside a started stream.
nlohmann::json StreamErrorBody(ErrorStyle style, const ApiError& error);

}  // namespace radixserve::api

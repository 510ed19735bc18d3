#include "api/api_error.h"

#include <string_view>
#include <utility>

namespace radixserve::api {

nlohmann::json ApiError::NativeBody() const { return {{"error", {{"message", message}}}}; }

ApiError FromStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported:
      return {400, status.message(), "BadRequestError", {}};
    case StatusCode::kNotFound:
      return {404, status.message(), "NotFoundError", {}};
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable:
      return {503, status.message(), "503", {}};
    case StatusCode::kDataLoss:
    case StatusCode::kInternal:
      break;
  }
  return {500, "Internal server error: " + status.message(), "InternalServerError", {}};
}

namespace {

nlohmann::json TgiBody(const ApiError& error) {
  const char* type = error.status == 503   ? "overloaded"
                     : error.status >= 500 ? "generation"
                                           : "validation";
  return {{"error", error.message}, {"error_type", type}};
}

nlohmann::json RtpLlmBody(const ApiError& error) {
  static const std::pair<const char*, int> kTypes[] = {{"CONCURRENCY_LIMIT_ERROR", 409},
                                                       {"CANCELLED_ERROR", 499},
                                                       {"ERROR_INPUT_FORMAT_ERROR", 507},
                                                       {"NO_PROMPT_ERROR", 509},
                                                       {"EMPTY_PROMPT_ERROR", 510},
                                                       {"LONG_PROMPT_ERROR", 511},
                                                       {"UNKNOWN_ERROR", 514},
                                                       {"UNSUPPORTED_OPERATION", 515},
                                                       {"ERROR_GENERATE_CONFIG_FORMAT", 604},
                                                       {"INVALID_PARAMS", 605}};
  const char* name = error.status == 503   ? "CONCURRENCY_LIMIT_ERROR"
                     : error.status == 499 ? "CANCELLED_ERROR"
                     : error.status < 500  ? "ERROR_INPUT_FORMAT_ERROR"
                                           : "UNKNOWN_ERROR";
  for (const auto& [type, code] : kTypes) {
    if (error.type == type) name = type;
  }
  int code = 514;
  for (const auto& [type, value] : kTypes) {
    if (std::string_view(name) == type) code = value;
  }
  return {{"error_code", code},
          {"error_code_str", std::to_string(code) + "_" + name},
          {"message", error.message}};
}

}  // namespace

nlohmann::json ErrorBody(ErrorStyle style, const ApiError& error) {
  if (style == ErrorStyle::kLightLlm) return {{"message", error.message}};
  if (style == ErrorStyle::kTgi) return TgiBody(error);
  if (style == ErrorStyle::kRtpLlm) return RtpLlmBody(error);
  if (style == ErrorStyle::kNative && error.status == 400 && error.type != "Bad Request") {
    return error.NativeBody();
  }
  return error.OpenAiBody();
}

nlohmann::json StreamErrorBody(ErrorStyle style, const ApiError& error) {
  if (style == ErrorStyle::kLightLlm) return {{"message", error.message}};
  if (style == ErrorStyle::kTgi) return TgiBody(error);
  if (style == ErrorStyle::kRtpLlm) return RtpLlmBody(error);
  if (style == ErrorStyle::kNative) return error.NativeBody();
  return {{"error", error.OpenAiBody()}};
}

}  // namespace radixserve::api

#include "api/api_error.h"

namespace radixserve::api {

nlohmann::json ApiError::OpenAiBody() const {
  return {{"object", "error"},
          {"message", message},
          {"type", type},
          {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
          {"code", status}};
}

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

}  // namespace

nlohmann::json ErrorBody(ErrorStyle style, const ApiError& error) {
  if (style == ErrorStyle::kLightLlm) return {{"message", error.message}};
  if (style == ErrorStyle::kTgi) return TgiBody(error);
  if (style == ErrorStyle::kNative && error.status == 400 && error.type != "Bad Request") {
    return error.NativeBody();
  }
  return error.OpenAiBody();
}

nlohmann::json StreamErrorBody(ErrorStyle style, const ApiError& error) {
  if (style == ErrorStyle::kLightLlm) return {{"message", error.message}};
  if (style == ErrorStyle::kTgi) return TgiBody(error);
  if (style == ErrorStyle::kNative) return error.NativeBody();
  return {{"error", error.OpenAiBody()}};
}

}  // namespace radixserve::api

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

}  // namespace radixserve::api

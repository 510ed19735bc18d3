// Expected failures as values: Status (ok or an error with a code and message) and Expected<T>
// (a value or an error Status). Programmer errors use RADIX_CHECK (check.h) instead.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "common/check.h"

namespace radixserve {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad user input: CLI argument, request field, config key
  kNotFound,           // a file, model, route or tensor that does not exist
  kUnsupported,        // valid input that this build or device cannot serve
  kResourceExhausted,  // no memory / queue full
  kDataLoss,           // a malformed or truncated file
  kUnavailable,        // a peer (another rank, a machine) cannot be reached
  kInternal,           // a bug: should be unreachable from input
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string message) {
  return {StatusCode::kInvalidArgument, std::move(message)};
}
inline Status NotFound(std::string message) { return {StatusCode::kNotFound, std::move(message)}; }
inline Status Unsupported(std::string message) {
  return {StatusCode::kUnsupported, std::move(message)};
}
inline Status DataLoss(std::string message) { return {StatusCode::kDataLoss, std::move(message)}; }
inline Status Unavailable(std::string message) {
  return {StatusCode::kUnavailable, std::move(message)};
}
inline Status Internal(std::string message) { return {StatusCode::kInternal, std::move(message)}; }

// A value of type T or an error E (a Status unless the caller names another error type, e.g. the
// API's ApiError). Construct from either; check ok() before value().
template <typename T, typename E = Status>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : data_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit
  Expected(E error) : data_(std::in_place_index<1>, std::move(error)) {   // NOLINT: implicit
    if constexpr (std::is_same_v<E, Status>) RADIX_CHECK(!std::get<1>(data_).ok());
  }

  bool ok() const { return data_.index() == 0; }
  // The error; a default-constructed E (for Status: ok) when there is a value.
  const E& status() const {
    static const E kNoError{};
    return ok() ? kNoError : std::get<1>(data_);
  }
  T& value() & {
    RADIX_CHECK(ok());
    return std::get<0>(data_);
  }
  const T& value() const& {
    RADIX_CHECK(ok());
    return std::get<0>(data_);
  }
  T&& value() && {
    RADIX_CHECK(ok());
    return std::get<0>(std::move(data_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, E> data_;
};

}  // namespace radixserve

// Propagates an error Status from an expression yielding Status.
#define RADIX_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::radixserve::Status radix_status_ = (expr);   \
    if (!radix_status_.ok()) return radix_status_; \
  } while (0)

// Evaluates an expression yielding Expected<T>; on error returns its Status from the enclosing
// function, otherwise moves the value into `lhs`: an existing variable or member, or a new
// declaration (`RADIX_ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(path));`, in scope after it).
// It expands to several statements: use braces around it under an if.
#define RADIX_ASSIGN_OR_RETURN(lhs, expr) \
  RADIX_ASSIGN_OR_RETURN_IMPL_(RADIX_STATUS_CONCAT_(radix_result_, __LINE__), lhs, expr)
#define RADIX_ASSIGN_OR_RETURN_IMPL_(result, lhs, expr) \
  auto result = (expr);                                 \
  if (!result.ok()) return result.status();             \
  lhs = std::move(result).value()
#define RADIX_STATUS_CONCAT_(a, b) RADIX_STATUS_CONCAT_INNER_(a, b)
#define RADIX_STATUS_CONCAT_INNER_(a, b) a##b

// FinishReason: why a generation ended, as SGLang reports it (reference §4.5): a stop (EOS, a
// stop token id, a stop string or stop_regex; with what matched), the length limit, or an abort
// (with why and the HTTP status). The token-level check (finish_check.h) produces the first two;
// the engine adds stop strings and aborts; the API formats all of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace radixserve::sampling {

enum class FinishKind {
  kStop,    // EOS, a stop token id or a stop string
  kLength,  // max_new_tokens or the context length reached
  kAbort,   // aborted: client gone, /abort_request, server shutdown, or an error after admission
};

struct FinishReason {
  FinishKind kind = FinishKind::kStop;
  // kStop: the matched stop string, or the matched token id (EOS / stop_token_ids).
  std::optional<std::string> matched_str;
  std::optional<int32_t> matched_token;
  // kLength: the limit that was reached (max_new_tokens), when the token check found it.
  int64_t length = 0;
  // kAbort: why, and the HTTP status the API should report (400 bad request, 503 queue full /
  // shutting down, 500 internal).
  std::string message;
  int status_code = 0;
};

// Builders (designated initializers would leave members implicitly initialized).
inline FinishReason LengthFinish(int64_t length = 0) {
  FinishReason r;
  r.kind = FinishKind::kLength;
  r.length = length;
  return r;
}
inline FinishReason StopTokenFinish(int32_t token) {
  FinishReason r;
  r.matched_token = token;
  return r;
}
inline FinishReason StopTextFinish(std::string text) {
  FinishReason r;
  r.matched_str = std::move(text);
  return r;
}
inline FinishReason AbortFinish(std::string message, int status_code = 0) {
  FinishReason r;
  r.kind = FinishKind::kAbort;
  r.message = std::move(message);
  r.status_code = status_code;
  return r;
}

}  // namespace radixserve::sampling

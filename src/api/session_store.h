// SessionStore: SGLang's sessions (/open_session, /close_session, /generate's session_params). A
// session keeps the token history of its requests so that a follow-up request sends only its new
// tokens: its prompt becomes a previous request's prompt + output (+ the new tokens), and the
// radix cache, which holds every finished request's KV, serves that prefix without recomputing it.
//
// Two kinds, as SGLang's SessionController has them:
//   * non-streaming: a tree of requests keyed by rid. session_params.rid names the request to
//     continue (none: start from nothing); replace drops that request's children (or, without a
//     rid, every request) and aborts the unfinished ones; offset cuts the history at a token
//     position (Python slice semantics) before the new tokens; drop_previous_output continues
//     from the named request's prompt without its output.
//   * streaming: one request at a time, each continuing the last finished one; replace, offset
//     and drop_previous_output are refused.
// A session with a timeout closes after that many seconds without a new request. Closing a
// streaming session whose request is still running waits until it ends.
//
// Thread safety: every method may be called from any thread (one mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace radixserve::api {

struct SessionOpenOptions {
  std::optional<std::string> id = std::nullopt;  // none: a new random id
  int64_t capacity_of_str_len = 0;
  bool streaming = false;
  std::optional<double> timeout_s = std::nullopt;
};

// /generate's session_params.
struct SessionParams {
  std::string id;
  std::optional<std::string> rid = std::nullopt;
  int64_t offset = 0;
  bool replace = false;
  bool drop_previous_output = false;
};

// What Begin decided for a request.
struct SessionTurn {
  std::vector<int32_t> input_ids;    // the request's whole prompt
  std::vector<std::string> aborted;  // rids of unfinished requests `replace` dropped: abort them
};

class SessionStore {
 public:
  using Clock = std::chrono::steady_clock;

  // The new session's id; kInvalidArgument if a session with that id is open.
  Expected<std::string> Open(const SessionOpenOptions& options);

  // Closes a session (unknown ids are ignored, as SGLang does). Returns the rids of its
  // unfinished non-streaming requests, which the caller aborts.
  std::vector<std::string> Close(std::string_view id);

  // A request `rid` continuing session params.id with its own `input_ids`; `bos` is stripped from
  // the front of input_ids when history precedes them. kInvalidArgument with SGLang's message when
  // the session or the named request does not exist, or the params do not apply.
  Expected<SessionTurn> Begin(const SessionParams& params, const std::string& rid,
                              std::vector<int32_t> input_ids, std::optional<int32_t> bos);

  // The request `rid` of session `id`, begun with Begin, was refused before the engine took it
  // (queue full, a bad field found late): it leaves the session as if never begun.
  void Drop(std::string_view id, const std::string& rid);

  // The request `rid` of session `id`, begun with Begin, ended: with its output (`completed`), or
  // aborted before it produced one.
  void Finish(std::string_view id, const std::string& rid, const std::vector<int32_t>& output_ids,
              bool completed);

  size_t size() const;

 private:
  struct Node {
    std::vector<int32_t> input_ids;
    std::vector<int32_t> output_ids;
    bool finished = false;
    std::optional<std::string> parent;
    std::vector<std::string> children;
  };
  struct Session {
    int64_t capacity_of_str_len = 0;
    bool streaming = false;
    std::optional<double> timeout_s;
    Clock::time_point last_active = Clock::now();
    std::map<std::string, Node, std::less<>> nodes;
    // Streaming: the running request's prompt (its node is made when it completes).
    bool inflight = false;
    std::string inflight_rid;
    std::vector<int32_t> inflight_input;
    bool close_on_finish = false;
  };

  // Removes `rid` and its descendants; collects the unfinished ones into `aborted`.
  static void Clear(Session& session, const std::string& rid, std::vector<std::string>* aborted);
  // Closes sessions past their timeout (and no request running on a streaming one).
  void ReapLocked(Clock::time_point now);

  mutable std::mutex mu_;
  std::map<std::string, Session, std::less<>> sessions_;
};

}  // namespace radixserve::api

// CallTracker: the engine requests behind one HTTP call (a /generate batch, or the n choices of an
// OpenAI request), their accumulated outputs, and the call's lifetime: submission, events,
// client disconnect (aborts whatever is unfinished), completion.
//
// Thread safety: the engine thread only posts each event to the writer (ResponseWriter::Post);
// events are folded and formatted on the connection's I/O strand, disconnects arrive on an HTTP
// thread; all state is guarded by one mutex, and the callbacks run under it (they format and
// write, never on the engine thread).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/response_writer.h"
#include "api/server_context.h"
#include "engine/request.h"
#include "engine/request_event.h"
#include "metrics/request_metrics.h"

namespace radixserve::api {

// Everything one engine request has produced so far.
struct ChoiceState {
  std::string rid;
  std::string text;                 // cumulative output text
  std::vector<int32_t> output_ids;  // cumulative output ids
  std::vector<engine::TokenLogprobInfo> output_logprobs;
  std::vector<engine::TokenLogprobInfo> input_logprobs;
  // return_hidden_states: one row per fed position (the prompt's first), see RequestEvent.
  std::vector<std::vector<float>> hidden_states;
  std::vector<float> output_entropy;  // return_entropy: one per output token
  std::vector<float> logits;          // return_logits: the latest event's row (RequestEvent)
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t storage_cached_tokens = -1;     // of which from the storage tier; -1: no such tier
  std::optional<int64_t> spec_verify_ct;  // with speculative decoding on
  double e2e_latency_s = 0.0;
  bool finished = false;
  std::optional<engine::FinishReason> finish;
  // Metrics bookkeeping: arrival and the time of the previous output.
  std::chrono::steady_clock::time_point arrival;
  std::chrono::steady_clock::time_point last_output;
  bool has_output = false;
  bool has_grammar = false;
  // --log-requests / --crash-dump-folder: the request as logged, its wall-clock arrival (epoch
  // seconds) and its crash-dump ticket. Filled only when one of them is on.
  nlohmann::ordered_json log_obj;
  double created_time = 0.0;
  uint64_t dump_ticket = 0;
};

class CallTracker : public std::enable_shared_from_this<CallTracker> {
 public:
  // Runs under the tracker's lock after an event was folded into choices()[index].
  using OnEvent = std::function<void(CallTracker&, size_t index, const engine::RequestEvent&)>;
  // Runs once, under the lock, when every choice has finished.
  using OnDone = std::function<void(CallTracker&)>;
  // Runs when the call is refused (nothing else is called then): before anything started
  // (stream_started false: answer with a plain HTTP error, even for a streaming call), or when the
  // engine refuses a request at submission (for a streaming call the stream has started then).
  using OnRejected = std::function<void(const ApiError&, bool stream_started)>;

  // Submits every request. If one is refused, the already-submitted ones are aborted and
  // `on_rejected` answers the call. An empty rid, or one that is live already (in this call or
  // another), refuses the call with 400 before anything is submitted. Rids stay claimed in
  // ctx.rids until their request finishes.
  //
  // `n` > 1 says the requests come in groups of n parallel samples of one prompt. As SGLang does,
  // each group's prompt is first prefilled alone (max_new_tokens 0) so that the n samples find
  // it in the radix cache and share its KV instead of computing it n times.
  //
  // Requests whose constraint is not compiled yet (AttachConstraints left request.grammar null)
  // are compiled on ctx.grammar_queue first and submitted from there; a grammar that fails to
  // compile answers the call through `on_rejected`. Either way Start returns at once.
  //
  // `stream`: the writer's event stream is started once the call is accepted, before the first
  // request reaches the engine (handlers never start it themselves).
  static void Start(ServerContext& ctx, ResponseWriterPtr writer,
                    std::vector<engine::GenerateRequest> requests, OnEvent on_event, OnDone on_done,
                    OnRejected on_rejected, size_t n, bool stream);

  std::vector<ChoiceState>& choices() { return choices_; }
  ResponseWriter& writer() { return *writer_; }
  ServerContext& context() { return ctx_; }

 private:
  // A prefill server's call: each request's room gets exactly one publication on the transfer
  // service, its prompt's rows when the request reaches its first token, else the failure that
  // ended the request or refused the call (so its decode server answers at once instead of
  // waiting out its timeout).
  class PrefillRooms {
   public:
    PrefillRooms(disagg::KvTransfer& transfer,
                 const std::vector<engine::GenerateRequest>& requests);
    bool empty() const { return open_.empty(); }
    // Publishes `room` unless it was published already (a request aborted after its call was
    // refused).
    void Publish(uint64_t room, disagg::KvTransfer::Rows rows, std::string failure);
    // Publishes `why` under every room not published yet.
    void FailRest(const std::string& why);

   private:
    disagg::KvTransfer& transfer_;
    std::mutex mu_;
    std::vector<uint64_t> open_;
  };
  // A call on its way to the engine: waiting on the prefill server's K/V, then on the grammar
  // queue, then submitted.
  struct PendingCall {
    ResponseWriterPtr writer;
    std::vector<engine::GenerateRequest> requests;
    OnEvent on_event;
    OnDone on_done;
    OnRejected on_rejected;
    size_t n;
    bool stream;
    std::shared_ptr<PrefillRooms> rooms;  // prefill server only
  };
  // The next stage of `call`: fetching its K/V (decode server), compiling its grammars, or
  // submitting it.
  static void Proceed(ServerContext& ctx, std::shared_ptr<PendingCall> call);
  // Decode server: fetches the prompt K/V of every request with a bootstrap_room from its prefill
  // server, then Proceeds (a failed fetch answers the call through on_rejected).
  static void FetchPrefilled(ServerContext& ctx, std::shared_ptr<PendingCall> call);

  CallTracker(ServerContext& ctx, ResponseWriterPtr writer, OnEvent on_event, OnDone on_done);
  // Every grammar is compiled and every K/V fetched: claims the rids and submits.
  static void Submit(ServerContext& ctx, std::shared_ptr<PendingCall> pending);
  void Handle(size_t index, engine::RequestEvent event);
  void SubmitAll(std::vector<engine::GenerateRequest> requests, const OnRejected& on_rejected);
  void AbortUnfinished();
  void ReleaseUnfinishedRids();
  void RecordMetrics(ChoiceState& choice, const engine::RequestEvent& event);
  void RecordReceived(const engine::GenerateRequest& request, ChoiceState& choice);
  void RecordFinished(ChoiceState& choice);

  ServerContext& ctx_;
  ResponseWriterPtr writer_;
  // The tokenizer-side series of this call's custom labels; null without --enable-metrics.
  metrics::RequestMetrics* request_metrics_ = nullptr;
  std::shared_ptr<PrefillRooms> rooms_;  // prefill server only
  OnEvent on_event_;
  OnDone on_done_;
  std::mutex mu_;
  std::vector<ChoiceState> choices_;
  size_t num_finished_ = 0;
  bool stream_ = false;  // the writer's event stream was started before submission
  bool rejected_ = false;
  bool disconnected_ = false;
};

}  // namespace radixserve::api

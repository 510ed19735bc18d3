#include "api/call_tracker.h"

#include <algorithm>

#include "api/crash_dump.h"
#include "api/request_builder.h"
#include "api/request_log.h"
#include "common/log.h"

namespace radixserve::api {

CallTracker::CallTracker(ServerContext& ctx, ResponseWriterPtr writer, OnEvent on_event,
                         OnDone on_done)
    : ctx_(ctx),
      writer_(std::move(writer)),
      request_metrics_(ctx.metrics != nullptr && writer_->log_metrics
                           ? &ctx.metrics->Requests(writer_->metric_labels)
                           : nullptr),
      on_event_(std::move(on_event)),
      on_done_(std::move(on_done)) {}

CallTracker::PrefillRooms::PrefillRooms(disagg::KvTransfer& transfer,
                                        const std::vector<engine::GenerateRequest>& requests)
    : transfer_(transfer) {
  for (const engine::GenerateRequest& request : requests) {
    if (request.export_kv && request.bootstrap) open_.push_back(request.bootstrap->room);
  }
}

void CallTracker::PrefillRooms::Publish(uint64_t room, disagg::KvTransfer::Rows rows,
                                        std::string failure) {
  {
    std::lock_guard lock(mu_);
    auto it = std::find(open_.begin(), open_.end(), room);
    if (it == open_.end()) return;
    open_.erase(it);
  }
  transfer_.Publish(room, std::move(rows), std::move(failure));
}

void CallTracker::PrefillRooms::FailRest(const std::string& why) {
  std::vector<uint64_t> rest;
  {
    std::lock_guard lock(mu_);
    rest.swap(open_);
  }
  for (const uint64_t room : rest) {
    transfer_.Publish(room, nullptr, "the prefill server refused the request: " + why);
  }
}

void CallTracker::Start(ServerContext& ctx, ResponseWriterPtr writer,
                        std::vector<engine::GenerateRequest> requests, OnEvent on_event,
                        OnDone on_done, OnRejected on_rejected, size_t n, bool stream) {
  auto call = std::make_shared<PendingCall>(
      PendingCall{std::move(writer), std::move(requests), std::move(on_event), std::move(on_done),
                  std::move(on_rejected), n, stream, nullptr});
  if (ctx.kv_transfer != nullptr && ctx.kv_transfer->role() == disagg::Role::kPrefill) {
    auto rooms = std::make_shared<PrefillRooms>(*ctx.kv_transfer, call->requests);
    if (!rooms->empty()) {
      call->rooms = rooms;
      call->on_rejected = [rooms, answer = std::move(call->on_rejected)](const ApiError& error,
                                                                         bool stream_started) {
        rooms->FailRest(error.message);
        answer(error, stream_started);
      };
    }
  }
  Proceed(ctx, std::move(call));
}

void CallTracker::Proceed(ServerContext& ctx, std::shared_ptr<PendingCall> call) {
  if (ctx.kv_transfer != nullptr && ctx.kv_transfer->role() == disagg::Role::kDecode &&
      std::any_of(call->requests.begin(), call->requests.end(), [](const auto& request) {
        return request.bootstrap.has_value() && request.prefilled_kv == nullptr;
      })) {
    FetchPrefilled(ctx, std::move(call));
    return;
  }
  bool compile = std::any_of(call->requests.begin(), call->requests.end(), [](const auto& request) {
    return request.grammar == nullptr && ConstraintSpec(request.sampling).has_value();
  });
  if (!compile) {
    Submit(ctx, std::move(call));
    return;
  }
  // A constraint missing from the grammar cache: compile it on the grammar queue, then submit
  // from there (AttachConstraints only attaches cached grammars when a queue exists).
  ctx.grammar_queue->Post([&ctx, call] {
    for (engine::GenerateRequest& request : call->requests) {
      if (Status compiled = CompileConstraint(ctx, request); !compiled.ok()) {
        call->on_rejected(BadRequest(compiled.message()), false);
        return;
      }
    }
    Submit(ctx, call);
  });
}

void CallTracker::FetchPrefilled(ServerContext& ctx, std::shared_ptr<PendingCall> call) {
  // One fetch per request with a room; the call goes on once all have answered.
  struct Fetches {
    std::mutex mu;
    size_t remaining = 0;
    std::optional<Status> failure;
  };
  auto fetches = std::make_shared<Fetches>();
  std::vector<size_t> wanted;
  for (size_t i = 0; i < call->requests.size(); ++i) {
    if (call->requests[i].bootstrap && call->requests[i].prefilled_kv == nullptr) {
      wanted.push_back(i);
    }
  }
  fetches->remaining = wanted.size();
  for (const size_t i : wanted) {
    const engine::Bootstrap& bootstrap = *call->requests[i].bootstrap;
    ctx.kv_transfer->Fetch(bootstrap.host, bootstrap.port, bootstrap.room,
                           [&ctx, call, fetches, i](Expected<disagg::KvTransfer::Rows> rows) {
                             {
                               std::lock_guard lock(fetches->mu);
                               if (rows.ok()) {
                                 call->requests[i].prefilled_kv = std::move(*rows);
                               } else if (!fetches->failure) {
                                 fetches->failure = rows.status();
                               }
                               if (--fetches->remaining != 0) return;
                             }
                             if (fetches->failure) {
                               RADIX_LOG_WARN("{}", fetches->failure->message());
                               call->on_rejected(FromStatus(*fetches->failure), false);
                               return;
                             }
                             Proceed(ctx, call);
                           });
  }
}

void CallTracker::Submit(ServerContext& ctx, std::shared_ptr<PendingCall> pending_call) {
  PendingCall& pc = *pending_call;
  std::vector<engine::GenerateRequest>& requests = pc.requests;
  const OnRejected& on_rejected = pc.on_rejected;
  const size_t n = pc.n;
  const bool stream = pc.stream;
  // Every rid of the call must be non-empty and not live already (SGLang refuses a duplicate
  // request ID); the n > 1 warm-up prefills get rids of their own.
  std::vector<std::string> rids;
  for (const engine::GenerateRequest& request : requests) {
    if (request.rid.empty()) {
      on_rejected(BadRequest("rid must be a non-empty string."), false);
      return;
    }
    rids.push_back(request.rid);
  }
  std::vector<std::string> warmup_rids;
  if (n > 1) {
    for (size_t first = 0; first < requests.size(); first += n) {
      warmup_rids.push_back(NewRid(ctx) + "_prefill");
    }
  }
  rids.insert(rids.end(), warmup_rids.begin(), warmup_rids.end());
  if (auto duplicate = ctx.rids.ClaimAll(rids)) {
    std::string shown = duplicate->size() > 128 ? duplicate->substr(0, 128) + "..." : *duplicate;
    on_rejected(BadRequest("Duplicate request ID: " + shown), false);
    return;
  }
  ResponseWriterPtr writer = pc.writer;
  if (stream) writer->StartStream();

  std::shared_ptr<CallTracker> call(
      new CallTracker(ctx, writer, std::move(pc.on_event), std::move(pc.on_done)));
  call->stream_ = stream;
  call->rooms_ = pc.rooms;
  call->choices_.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    call->choices_[i].rid = requests[i].rid;
    call->choices_[i].arrival = requests[i].arrival;
    call->choices_[i].has_grammar = requests[i].sampling.HasGrammar();
    call->RecordReceived(requests[i], call->choices_[i]);
  }
  std::weak_ptr<CallTracker> weak = call;
  writer->OnDisconnect([weak] {
    if (auto self = weak.lock()) self->AbortUnfinished();
  });
  if (n <= 1 || requests.empty()) {
    call->SubmitAll(std::move(requests), on_rejected);
    return;
  }

  // Prefill each group's prompt once; submit the samples when every warm-up has finished.
  struct Pending {
    std::mutex mu;
    std::vector<engine::GenerateRequest> requests;
    size_t remaining = 0;
  };
  auto pending = std::make_shared<Pending>();
  pending->requests = std::move(requests);
  std::vector<engine::GenerateRequest> warmups;
  for (size_t first = 0; first < pending->requests.size(); first += n) {
    engine::GenerateRequest warm;
    warm.rid = warmup_rids[first / n];
    warm.input_ids = pending->requests[first].input_ids;
    warm.sampling.max_new_tokens = 0;
    warm.priority = pending->requests[first].priority;
    warm.extra_key = pending->requests[first].extra_key;  // the samples must find it cached
    warm.lora = pending->requests[first].lora;
    // On a decode server the prompt's K/V came from the prefill server: the warm-up only puts it
    // into the cache (and computes the last token).
    warm.prefilled_kv = pending->requests[first].prefilled_kv;
    warm.detokenize = false;
    warmups.push_back(std::move(warm));
  }
  pending->remaining = warmups.size();
  for (engine::GenerateRequest& warm : warmups) {
    std::string warm_rid = warm.rid;
    Status submitted = ctx.engine->Submit(
        std::move(warm), [call, pending, on_rejected, warm_rid](engine::RequestEvent event) {
          if (!event.finished) return;
          call->ctx_.rids.Release(warm_rid);
          std::vector<engine::GenerateRequest> ready;
          {
            std::lock_guard lock(pending->mu);
            if (--pending->remaining != 0) return;
            ready = std::move(pending->requests);
          }
          bool gone = false;
          {
            std::lock_guard lock(call->mu_);
            gone = call->disconnected_ || call->rejected_;
          }
          if (gone) {
            call->ReleaseUnfinishedRids();
            return;
          }
          call->SubmitAll(std::move(ready), on_rejected);
        });
    if (!submitted.ok()) {
      {
        std::lock_guard lock(call->mu_);
        call->rejected_ = true;
      }
      call->ReleaseUnfinishedRids();
      for (const std::string& rid : warmup_rids) ctx.rids.Release(rid);
      on_rejected(FromStatus(submitted), stream);
      return;
    }
  }
}

void CallTracker::ReleaseUnfinishedRids() {
  std::lock_guard lock(mu_);
  for (const ChoiceState& choice : choices_) {
    if (!choice.finished) ctx_.rids.Release(choice.rid);
  }
}

void CallTracker::SubmitAll(std::vector<engine::GenerateRequest> requests,
                            const OnRejected& on_rejected) {
  auto self = shared_from_this();
  for (size_t i = 0; i < requests.size(); ++i) {
    // A prefill server's disaggregated request: its prompt's K/V rows go to the transfer service
    // under the request's room as soon as the engine reports the end (on the engine thread; the
    // service only queues them). A refusal publishes through on_rejected (see Start).
    std::optional<uint64_t> room;
    if (rooms_ != nullptr && requests[i].export_kv && requests[i].bootstrap) {
      room = requests[i].bootstrap->room;
    }
    // The engine thread only hands the event over; folding and formatting run on the
    // connection's I/O strand.
    Status submitted =
        ctx_.engine->Submit(std::move(requests[i]), [self, i, room](engine::RequestEvent event) {
          if (room && event.finished) {
            std::string failure;
            if (event.kv_rows == nullptr && event.finish_reason) {
              failure = "the prefill server's request ended without its prompt's KV: " +
                        event.finish_reason->message;
            }
            self->rooms_->Publish(*room, std::move(event.kv_rows), std::move(failure));
          }
          ResponseWriter& writer = *self->writer_;
          writer.Post(
              [self, i, event = std::move(event)]() mutable { self->Handle(i, std::move(event)); });
        });
    if (!submitted.ok()) {
      {
        std::lock_guard lock(mu_);
        rejected_ = true;
      }
      for (size_t j = 0; j < i; ++j) {
        ctx_.engine->Abort(choices_[j].rid, engine::AbortMatch::kExactRid);
      }
      ReleaseUnfinishedRids();
      on_rejected(FromStatus(submitted), stream_);
      return;
    }
  }
}

void CallTracker::Handle(size_t index, engine::RequestEvent event) {
  std::lock_guard lock(mu_);
  if (rejected_) return;
  ChoiceState& choice = choices_[index];
  if (choice.finished) return;
  choice.text += event.text_delta;
  choice.output_ids.insert(choice.output_ids.end(), event.new_token_ids.begin(),
                           event.new_token_ids.end());
  for (auto& info : event.output_logprobs) choice.output_logprobs.push_back(info);
  if (!event.input_logprobs.empty()) choice.input_logprobs = event.input_logprobs;
  choice.output_entropy.insert(choice.output_entropy.end(), event.output_entropy.begin(),
                               event.output_entropy.end());
  for (auto& row : event.hidden_states) choice.hidden_states.push_back(std::move(row));
  if (!event.logits.empty()) choice.logits = std::move(event.logits);
  choice.prompt_tokens = event.prompt_tokens;
  choice.completion_tokens = event.completion_tokens;
  choice.cached_tokens = event.cached_tokens;
  choice.storage_cached_tokens = event.storage_cached_tokens;
  choice.spec_verify_ct = event.spec_verify_ct;
  choice.e2e_latency_s = event.e2e_latency_s;
  RecordMetrics(choice, event);
  if (event.finished) {
    choice.finished = true;
    choice.finish = event.finish_reason;
    ++num_finished_;
    ctx_.rids.Release(choice.rid);
    RecordFinished(choice);
  }
  on_event_(*this, index, event);
  if (event.finished && num_finished_ == choices_.size()) on_done_(*this);
}

// Tokenizer-side metrics, as SGLang's TokenizerManager records them: TTFT at the first output,
// inter-token latency per later output, counters and e2e latency at the finish.
void CallTracker::RecordMetrics(ChoiceState& choice, const engine::RequestEvent& event) {
  if (request_metrics_ == nullptr) return;
  metrics::RequestMetrics& requests = *request_metrics_;
  const auto now = std::chrono::steady_clock::now();
  const auto new_tokens = static_cast<int64_t>(event.new_token_ids.size());
  if (new_tokens > 0) {
    if (!choice.has_output) {
      requests.ObserveTimeToFirstToken(std::chrono::duration<double>(now - choice.arrival).count());
    } else {
      requests.ObserveInterTokenLatency(
          std::chrono::duration<double>(now - choice.last_output).count(), new_tokens);
    }
    choice.has_output = true;
    choice.last_output = now;
  }
  if (event.finished) {
    requests.ObserveFinishedRequest({.prompt_tokens = event.prompt_tokens,
                                     .generation_tokens = event.completion_tokens,
                                     .cached_tokens = event.cached_tokens,
                                     .e2e_latency_s = event.e2e_latency_s,
                                     .has_grammar = choice.has_grammar,
                                     .retraction_count = 0});
  }
}

// SGLang logs a request when the tokenizer manager receives it and when it finishes, and keeps
// it for the crash dump.
void CallTracker::RecordReceived(const engine::GenerateRequest& request, ChoiceState& choice) {
  if (writer_->no_logs) return;
  const std::shared_ptr<const RequestLog> log = ctx_.request_log.load();
  if (log == nullptr && ctx_.crash_dump == nullptr) return;
  choice.log_obj = RequestObjJson(ctx_, request);
  choice.created_time = CrashDump::NowEpochSeconds();
  if (log != nullptr) log->LogReceive(choice.log_obj);
  if (ctx_.crash_dump != nullptr) {
    choice.dump_ticket = ctx_.crash_dump->RecordReceived(choice.log_obj, choice.created_time);
  }
}

void CallTracker::RecordFinished(ChoiceState& choice) {
  // A request received before /configure_logging turned the log on was not recorded then.
  if (choice.log_obj.is_null()) return;
  const nlohmann::ordered_json out = RequestOutJson(choice);
  if (const std::shared_ptr<const RequestLog> log = ctx_.request_log.load()) {
    log->LogFinish(choice.log_obj, out);
  }
  if (ctx_.crash_dump != nullptr) {
    ctx_.crash_dump->RecordFinished(choice.dump_ticket, choice.log_obj, out, choice.created_time,
                                    CrashDump::NowEpochSeconds());
  }
}

void CallTracker::AbortUnfinished() {
  std::vector<std::string> rids;
  {
    std::lock_guard lock(mu_);
    disconnected_ = true;
    for (const ChoiceState& choice : choices_) {
      if (!choice.finished) rids.push_back(choice.rid);
    }
  }
  // Exactly this call's requests: a rid prefix could reach other clients' requests.
  for (const std::string& rid : rids) ctx_.engine->Abort(rid, engine::AbortMatch::kExactRid);
}

}  // namespace radixserve::api

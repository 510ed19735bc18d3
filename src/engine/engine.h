// Engine: the facade the API layer talks to. One engine thread owns all scheduling state (queues,
// sequences, KV pool, prefix cache) and runs the loop: drain the inbox, plan a step, run the
// model, sample, commit tokens, detokenize, match stops, emit events.
//
// Thread safety: every public method may be called from any thread. Callbacks (EventSink) run on
// the engine thread and must return quickly without blocking (post the event elsewhere).
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/embed_request.h"
#include "engine/expert_recorder.h"
#include "engine/request.h"
#include "engine/request_event.h"
#include "engine/step_profiler.h"
#include "kv/hicache.h"

namespace radixserve::model {
class CausalLM;
}  // namespace radixserve::model

namespace radixserve::engine {

// Receives the events of one request, on the engine thread, in order.
using EventSink = std::function<void(RequestEvent)>;

// How Engine::Abort matches request ids. A client's own requests are aborted by their exact rids;
// prefix matching (SGLang's /abort_request semantics, empty = all) is an administrator's tool.
enum class AbortMatch { kExactRid, kRidPrefix };

// How /pause_generation stops the engine (SGLang's PauseGenerationReqInput.mode).
enum class PauseMode {
  kAbort,    // every request in flight ends with an abort
  kRetract,  // running requests go back to the waiting queue, their KV to the prefix cache
             // (recomputed, or found in the cache, after Continue)
  kInPlace,  // requests keep their KV and go on where they stopped after Continue
};

// The memory /release_memory_occupation gives back and /resume_memory_occupation takes again
// (SGLang's tags "kv_cache" and "weights").
struct MemoryRegions {
  bool kv_cache = false;
  bool weights = false;
};

// Load and cache figures for /get_load, /server_info, /metrics and the leak check.
struct EngineStats {
  int32_t dp_rank = 0;  // the replica these figures describe (aggregates: 0)
  int64_t num_running_reqs = 0;
  int64_t num_queued_reqs = 0;
  int64_t max_total_num_tokens = 0;
  int64_t max_running_requests = 0;
  int64_t context_len = 0;
  int64_t used_tokens = 0;    // KV slots held by live sequences
  int64_t cached_tokens = 0;  // KV slots held by the prefix cache
  double token_usage = 0.0;   // used / total
  // KV slots the live sequences would hold if each ran to its max_new_tokens: used_tokens plus
  // every running and queued sequence's remaining tokens (LightLLM's /token_load estimate).
  int64_t peak_tokens = 0;
  double cache_hit_rate = 0.0;  // cached prompt tokens / prompt tokens, since start
  double gen_throughput = 0.0;  // tokens/s over the last decode log interval
  // SGLang's idle leak check as of this snapshot: "ok" (busy-but-consistent, or idle and every
  // KV slot free or held by the prefix cache), else what is wrong. Computed on the engine thread
  // whenever it becomes idle, so readers never wait on the engine.
  std::string kv_leak_check = "ok";
  int64_t num_retractions = 0;
  // Output tokens a grammar forced and jump-forward appended without a sampling step.
  int64_t jump_forward_tokens = 0;
  // Speculative decoding over the last decode log interval (0 without speculation): output
  // tokens per verify step of a speculative sequence (SGLang's accept length), and the accepted
  // share of the proposed draft tokens.
  double spec_accept_length = 0.0;
  double spec_accept_rate = 0.0;
  bool paused = false;     // between /pause_generation and /continue_generation
  MemoryRegions released;  // between /release_memory_occupation and /resume_memory_occupation
  int64_t prompt_tokens_total = 0;         // prompt tokens admitted since start
  int64_t cached_prompt_tokens_total = 0;  // of which came from the prefix cache
  // The hierarchical cache's storage tier, when on (totals since start).
  bool storage_tier = false;
  kv::HiCacheStats storage;
};

class Engine {
 public:
  virtual ~Engine() = default;

  // Queues a request. The returned status is an immediate rejection (queue full: kResourceExhausted
  // -> 503; prompt too long and not truncatable: kInvalidArgument -> 400); on success every
  // outcome, including later errors, arrives through `sink` ending with a finished event.
  virtual Status Submit(GenerateRequest request, EventSink sink) = 0;

  // Queues one embedding input (prefill only, no KV kept). Immediate rejection as for Submit;
  // otherwise `sink` receives exactly one result. Engines of generation models reject every
  // call with kInvalidArgument naming --is-embedding.
  virtual Status SubmitEmbed(EmbedRequest request, EmbedSink sink);

  // Aborts the request whose rid equals `rid` (kExactRid), or every request whose rid starts with
  // `rid` (kRidPrefix; empty: all). Their sinks receive a final kAbort event; their KV is released
  // within one step. Never blocks on the engine thread.
  virtual void Abort(std::string_view rid, AbortMatch match) = 0;

  // /flush_cache: drops the prefix cache when no request is running or queued (and returns freed
  // KV memory to the OS); kResourceExhausted (SGLang answers 400 with a message) otherwise.
  // `done` runs once, on an engine thread (or the caller's, after shutdown); it must not block.
  // Never blocks the caller: safe on HTTP I/O threads.
  virtual void FlushCacheAsync(std::function<void(Status)> done) = 0;

  // /clear_hicache_storage_backend: deletes every KV block the hierarchical cache's storage tier
  // holds. kInvalidArgument when the server has no storage tier. `done` as for FlushCacheAsync.
  virtual void ClearStorageAsync(std::function<void(Status)> done) {
    done(InvalidArgument("Hierarchical cache storage backend is not enabled."));
  }

  // FlushCacheAsync, waiting for the result. Blocks until the current step ends: never call it
  // from an HTTP I/O thread.
  Status FlushCache();

  // /pause_generation: no step runs until Continue; requests submitted meanwhile wait in the
  // queue (as SGLang holds them). `done` runs once the engine has paused (the current step
  // ended, kAbort's aborts sent, kRetract's sequences requeued), on an engine thread (or the
  // caller's, after shutdown); it must not block. Never blocks the caller.
  virtual void PauseAsync(PauseMode mode, std::function<void()> done) = 0;

  // /continue_generation: scheduling resumes. A no-op when not paused.
  virtual void Continue() = 0;

  // The outcome of a weight update: Ok or why not, and how many queued requests waited for it
  // (SGLang's num_paused_requests).
  using UpdateModelDone = std::function<void(Status, int64_t held_requests)>;

  // /update_weights_from_disk: serves `model` (same architecture and shapes; the caller checks)
  // from now on. New admissions are held while the running requests finish with the old weights
  // (a paused engine swaps at once); then the model is swapped, the prefix cache flushed (when
  // `flush_cache`; its KV came from the old weights) and admission resumes. `done` runs once, on
  // an engine thread; it must not block. Never blocks the caller. Engines without a model to
  // swap (embedding servers) answer Unsupported.
  virtual void UpdateModelAsync(std::shared_ptr<const model::CausalLM> model, bool flush_cache,
                                UpdateModelDone done);

  // /release_memory_occupation: gives memory back while the engine is idle (nothing running; a
  // paused engine may hold queued requests). kv_cache: the prefix cache is flushed and the KV
  // pool's pages return to the OS; weights: the engine drops its model (the caller drops the
  // other references). Until ResumeMemoryAsync has taken back every released region no step runs
  // and submitted requests wait in the queue. `done` gets Ok, or kInvalidArgument when
  // requests are running or queued. Runs on an engine thread; never blocks the caller. Engines
  // without a KV pool or a model to release (embedding servers) answer Unsupported.
  virtual void ReleaseMemoryAsync(MemoryRegions regions, std::function<void(Status)> done);
  // /resume_memory_occupation: takes back `regions` (weights: `model`, reloaded by the caller,
  // serves from now on). kInvalidArgument when a region is not released.
  virtual void ResumeMemoryAsync(MemoryRegions regions,
                                 std::shared_ptr<const model::CausalLM> model,
                                 std::function<void(Status)> done);

  // /start_profile: records the engine's steps (step_profiler.h). `started` runs once with Ok or
  // why not (a recording is in progress; an engine without a step loop); `sink` then receives
  // each replica's trace when its recording ends (num_steps reached, or StopProfileAsync). Both
  // run on an engine thread and must not block. Never blocks the caller.
  virtual void StartProfileAsync(ProfileOptions options, TraceSink sink,
                                 std::function<void(Status)> started);
  // /stop_profile: ends the recording, each replica's trace going to the sink first; `stopped`
  // gets Ok, or an error when none was in progress.
  virtual void StopProfileAsync(std::function<void(Status)> stopped);

  // /start_expert_distribution_record, /stop_..., /dump_... (expert_recorder.h): `done` gets Ok
  // with each replica's dump for kDump (nothing for the others), or kInvalidArgument when this
  // server records no expert distribution (no --expert-distribution-recorder-mode, or a model
  // without experts). Runs on an engine thread and must not block. Never blocks the caller.
  enum class ExpertRecordAction { kStart, kStop, kDump };
  using ExpertRecordDone = std::function<void(Expected<std::vector<ExpertDump>>)>;
  virtual void ExpertRecordAsync(ExpertRecordAction action, ExpertRecordDone done);

  // Load figures; with several data-parallel replicas, their aggregate (sums; token_usage and
  // cache_hit_rate over the sums).
  virtual EngineStats Stats() const = 0;

  // One EngineStats per data-parallel replica, in dp_rank order (one engine: {Stats()}). For
  // /get_load, /server_info's internal_states and metrics labeled by dp_rank.
  virtual std::vector<EngineStats> ReplicaStats() const { return {Stats()}; }

  // The layout of this engine's KV rows (kv/kv_rows.h: what a prefill server's rows must match);
  // nullopt for an engine without a KV pool. Fixed once created; any thread.
  virtual std::optional<kv::KvRowsLayout> KvLayout() const { return std::nullopt; }

  // The leak check (SGLang's): when idle, every KV slot is free or held by the prefix cache.
  // Ok when busy-but-consistent or idle-and-clean; an error describing the discrepancy otherwise.
  // Runs on the engine thread and waits for it: never call it from an HTTP I/O thread (read
  // EngineStats::kv_leak_check there).
  virtual Status CheckLeaks() const = 0;

  // Stops accepting requests, aborts what is in flight and joins the engine thread.
  virtual void Shutdown() = 0;
};

inline void Engine::UpdateModelAsync(std::shared_ptr<const model::CausalLM>, bool,
                                     UpdateModelDone done) {
  done(Unsupported("This server's engine cannot swap its model (an embedding server)."), 0);
}

inline void Engine::ReleaseMemoryAsync(MemoryRegions, std::function<void(Status)> done) {
  done(
      Unsupported("This server's engine has no KV pool or model to release (an embedding "
                  "server)."));
}

inline void Engine::ResumeMemoryAsync(MemoryRegions, std::shared_ptr<const model::CausalLM>,
                                      std::function<void(Status)> done) {
  done(
      Unsupported("This server's engine has no KV pool or model to release (an embedding "
                  "server)."));
}

inline Status Engine::SubmitEmbed(EmbedRequest, EmbedSink) {
  return InvalidArgument(
      "This server serves a generation model; embedding routes need an embedding model served "
      "with --is-embedding.");
}

inline void Engine::StartProfileAsync(ProfileOptions, TraceSink,
                                      std::function<void(Status)> started) {
  started(
      Unsupported("This engine has no step loop to profile (embedding models run each batch "
                  "as one forward pass)."));
}

inline void Engine::ExpertRecordAsync(ExpertRecordAction, ExpertRecordDone done) {
  done(InvalidArgument(
      "This server records no expert distribution: an embedding server has no experts."));
}

inline void Engine::StopProfileAsync(std::function<void(Status)> stopped) {
  stopped(InvalidArgument("Profiling is not in progress. Call /start_profile first."));
}

inline Status Engine::FlushCache() {
  auto promise = std::make_shared<std::promise<Status>>();
  std::future<Status> result = promise->get_future();
  FlushCacheAsync([promise](Status status) { promise->set_value(std::move(status)); });
  return result.get();
}

}  // namespace radixserve::engine

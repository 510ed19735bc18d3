// EngineLoop: the Engine implementation for one replica. Public methods post to an inbox; one
// engine thread owns everything else (scheduler, KV memory, request states) and runs the loop:
//   drain inbox (submits, aborts, commands) -> abort flagged sequences -> PlanStep -> forward ->
//   CompleteStep -> input logprobs, grammar masks, logits processing and sampling per row ->
//   grammar accept, commit tokens, finish checks, events -> release finished sequences to the
//   prefix cache -> logs.
// When there is nothing to do it waits on a condition variable (indefinitely with
// --sleep-on-idle, else polling every millisecond as SGLang's busy loop would).
//
// Thread safety: see engine.h. Shutdown (or the destructor) joins the thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/thread_pool.h"
#include "engine/batch_builder.h"
#include "engine/engine.h"
#include "engine/engine_config.h"
#include "engine/request_state.h"
#include "engine/step_profiler.h"
#include "engine/step_progress.h"
#include "engine/watchdog.h"
#include "kv/kv_memory.h"
#include "model/causal_lm.h"
#include "sampling/logits_processor.h"
#include "sampling/sampler.h"
#include "sampling/seed_source.h"
#include "sched/scheduler.h"
#include "spec/draft_runner.h"
#include "spec/ngram_table.h"
#include "tokenizer/tokenizer.h"

namespace radixserve::engine {

class EngineLoop final : public Engine {
 public:
  EngineLoop(EngineConfig config, std::unique_ptr<kv::KvMemory> memory,
             std::unique_ptr<sched::Scheduler> scheduler,
             std::shared_ptr<const model::CausalLM> model,
             std::shared_ptr<const tokenizer::Tokenizer> tokenizer, ThreadPool* pool,
             std::shared_ptr<const model::CausalLM> draft_model = nullptr);
  ~EngineLoop() override;

  // Starts the engine thread and its watchdog (CreateEngine does).
  void Start();

  Status Submit(GenerateRequest request, EventSink sink) override;
  void Abort(std::string_view rid, AbortMatch match) override;
  void FlushCacheAsync(std::function<void(Status)> done) override;
  void ClearStorageAsync(std::function<void(Status)> done) override;
  void PauseAsync(PauseMode mode, std::function<void()> done) override;
  void UpdateModelAsync(std::shared_ptr<const model::CausalLM> model, bool flush_cache,
                        UpdateModelDone done) override;
  void Continue() override;
  void ReleaseMemoryAsync(MemoryRegions regions, std::function<void(Status)> done) override;
  void ResumeMemoryAsync(MemoryRegions regions, std::shared_ptr<const model::CausalLM> model,
                         std::function<void(Status)> done) override;
  void StartProfileAsync(ProfileOptions options, TraceSink sink,
                         std::function<void(Status)> started) override;
  void StopProfileAsync(std::function<void(Status)> stopped) override;
  void ExpertRecordAsync(ExpertRecordAction action, ExpertRecordDone done) override;
  EngineStats Stats() const override;
  std::optional<kv::KvRowsLayout> KvLayout() const override { return kv_layout_; }
  Status CheckLeaks() const override;
  void Shutdown() override;

 private:
  struct Submission {
    GenerateRequest request;
    EventSink sink;
  };
  using Command = std::function<void()>;

  void Run();
  bool DrainInbox();
  void AdmitSubmission(Submission submission);
  struct AbortOrder {
    std::string rid;
    AbortMatch match;
  };
  void AbortMatching(const AbortOrder& order);
  void AbortFlagged();
  // Ends a held request: gives up its prefix holds, sends its final event with `reason`, then
  // EndRequest.
  void FinishSequence(sched::Sequence* seq, FinishReason reason, bool cache_kv);
  // The last step of every request the scheduler holds (its state has sent the final event):
  // the scheduler releases the sequence (KV into the prefix cache if cache_kv) and the record
  // goes. seq dangles afterwards.
  void EndRequest(sched::Sequence* seq, bool cache_kv);
  // Ends a request whose sequence the scheduler handed back (taken from the waiting queue, or
  // displaced by a more important one): prefix holds, final event, record.
  void EndHandedBack(sched::Sequence* seq, FinishReason reason);
  // Every held sequence, oldest first (the order aborts and shutdown end them in).
  std::vector<sched::Sequence*> HeldInArrivalOrder() const;
  RequestState& StateOf(const sched::Sequence* seq) { return requests_.at(seq->id)->state; }
  // The hierarchical cache's storage tier (engine_kv_loads.cpp): a queued sequence starts loading
  // its stored prefix; before each plan finished loads go into the radix cache and the prefetch
  // policy decides who may be admitted; an admitted (or ended) sequence gives up its load.
  void StartPrefetch(sched::Sequence* seq);
  void PollPrefetches();
  // Gives up what a queued sequence held in the prefix cache for its admission: its storage load
  // and the K/V rows a prefill server sent (admitted, or ended).
  void ReleasePrefixHolds(sched::Sequence* seq, RequestState* state);
  // Only the K/V rows' lock (before a flush, whose own UnlockAll ends the storage loads' holds).
  void ReleaseTransferredPrefix(sched::Sequence* seq);
  // Prefill/decode disaggregation (engine_kv_loads.cpp). Decode side: puts a request's
  // prefilled_kv into the prefix cache and locks it for the queued sequence; false (the request
  // was ended with an error) when the rows' layout differs from this pool's.
  bool InsertPrefilledKv(sched::Sequence* seq, RequestState& state);
  // Prefill side: once seq's prompt K/V is complete, copies its rows for the final event of an
  // export_kv request.
  void ExportPromptKv(const sched::Sequence* seq, RequestState& state);
  // engine_step.cpp
  void RunStep(sched::StepPlan& plan);
  void SampleEntry(const sched::StepEntry& entry, std::span<float> logits);
  // Draws seq's next token from its logits row (processed in place): penalties, the grammar
  // mask, the request's sampling params at step output_ids.size() (so the token depends on
  // (logits, seed, step) only, never on whether the step speculated), logprobs when asked; the
  // grammar accepts the token. Fills sample_out_; the caller appends the token. A grammar
  // failure finishes the sequence and returns false.
  bool SampleToken(sched::Sequence* seq, RequestState& state, std::span<float> logits);
  // Appends `token` (from SampleToken) to seq's output and reports it to the request; with
  // `last` (no more tokens of this step follow) the event may go out, after the tokens the
  // grammar forces next (jump-forward) are appended too. kDone: the request finished (the caller
  // releases the sequence); kGone: a grammar failure ended and released it already.
  enum class Commit { kMore, kDone, kGone };
  Commit CommitToken(sched::Sequence* seq, RequestState& state, int32_t token, bool last);
  // Ends a constrained sequence whose grammar failed (no token allowed, a token rejected).
  void FinishGrammarError(sched::Sequence* seq, const Status& error);
  // --enable-nan-detection / --crash-on-nan: a NaN in the logits row of `rid` (before any
  // processing) warns, or logs an error and aborts the process.
  void CheckNan(const std::string& rid, std::span<const float> logits) const;
  // engine_spec.cpp: speculative decoding.
  // Whether a sequence's decode steps speculate: every request but those returning hidden
  // states (greedy or sampled, with logprobs or a grammar: verification samples each row as the
  // one-token path would, so the output is the same either way).
  bool Speculates(const RequestState& state) const;
  bool speculating() const { return ngram_ != nullptr || draft_ != nullptr; }
  // Sets the draft_ids of every running speculative sequence for the next step: from the n-gram
  // table (after recording the sequence's new tokens in it), or from the draft model (one batched
  // run for all of them; a failed run only means no drafts this step).
  void ProposeDrafts();
  // Swaps in a pending model once no sequence is running or mid-prefill (or the engine is
  // paused), flushes the prefix cache if asked, and resumes admission.
  void MaybeSwapModel();
  // Drops the prefix cache with sequences still waiting (a weight swap, a memory release): their
  // cache matches are forgotten, so admission matches again. The flush's refusal otherwise.
  Status FlushCacheUnderWaiting();
  // Verifies a speculative entry whose num_drafts + 1 logits rows start at first_row: samples
  // row by row (SampleToken, each row seeing the tokens accepted before it), stops at
  // the first token that differs from its draft or finishes the request, and keeps the K/V of
  // the accepted drafts only; sets the sequence's next draft budget (matched + 1 after a
  // rejection, doubled up to the maximum after a full accept). Returns the tokens appended.
  size_t VerifyEntry(const sched::StepEntry& entry, size_t first_row);
  void ScoreInput(const sched::StepEntry& entry, size_t position, std::span<const float> logits);
  std::string DescribePlan(const sched::StepPlan& plan) const;
  std::string DescribeState() const;
  // Records a step that ran for the profiler.
  void ProfileStep(const sched::StepPlan& plan, const char* stage,
                   StepProfiler::Clock::time_point start);
  // LightLLM's --long_truncation_mode on a request too long for max_req_len (EngineConfig).
  Status TruncateLongPrompt(GenerateRequest& request) const;
  void LogPrefill(const sched::StepPlan& plan);
  void LogDecode();
  // LightLLM's throughput lines, every --log_stats_interval seconds of steps (when given).
  void LogThroughput();
  void PublishStats();
  Status RunOnEngineThread(std::function<Status()> fn) const;
  // Runs `command` on the engine thread (or inline, serialized, once it has ended); never waits.
  void PostCommand(Command command) const;

  // One record per request from admission to its final event, keyed by Sequence::id: the
  // scheduler's sequence (borrowed by the scheduler while it holds it), the request's state and
  // a pending abort. Engine thread only. Declared before scheduler_, so it outlives the borrower.
  struct ActiveRequest {
    template <typename... StateArgs>
    explicit ActiveRequest(sched::Sequence s, StateArgs&&... args)
        : seq(std::move(s)), state(std::forward<StateArgs>(args)...) {}
    sched::Sequence seq;
    RequestState state;
    bool abort_requested = false;  // AbortMatching found it running; AbortFlagged ends it
  };

  EngineConfig config_;
  std::unique_ptr<kv::KvMemory> memory_;
  std::unordered_map<uint64_t, std::unique_ptr<ActiveRequest>> requests_;
  bool abort_pending_ = false;  // some record has abort_requested
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::shared_ptr<const model::CausalLM> model_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  ThreadPool* pool_;
  model::KvCacheView kv_view_;
  std::vector<int32_t> eos_ids_;
  int64_t vocab_size_;

  // Engine-thread state.
  sampling::LogitsProcessor logits_processor_;
  sampling::Sampler sampler_;
  sampling::SeedSource seeds_;
  sampling::SampleOutput sample_out_;
  std::vector<float> logits_;
  std::vector<uint32_t> grammar_mask_;  // the current constrained row's token bitmask
  // --first_token_constraint_mode: the bitmask of the ids a first output token may be.
  std::vector<uint32_t> first_token_mask_;
  // Jump-forward: at most this many forced tokens are appended after one sampled token.
  static constexpr int64_t kMaxJumpForwardTokens = 64;
  int64_t jump_forward_tokens_ = 0;  // forced tokens appended without sampling, since start
  std::vector<LogitRow> logit_rows_;
  // return_hidden_states: the hidden rows of the current step and (entry, fill position) of each.
  std::vector<float> hidden_;
  // return_hidden_states rows of a step: entry, position, and the row among every token's (when
  // NEXTN asks for all of them; else the rows follow this list's order).
  struct HiddenRow {
    size_t entry, position, token;
  };
  std::vector<HiddenRow> hidden_positions_;
  // Speculative decoding: the replica's n-gram table or draft model (both null when off) and the
  // decode log interval's verify figures.
  std::unique_ptr<spec::NgramTable> ngram_;
  std::unique_ptr<spec::DraftRunner> draft_;
  std::vector<spec::DraftJob> draft_jobs_;
  std::vector<std::vector<int32_t>> draft_tokens_;  // the jobs' token lists
  std::vector<sched::Sequence*> draft_seqs_;
  int64_t spec_steps_ = 0;     // decode steps of speculative sequences
  int64_t spec_tokens_ = 0;    // tokens those steps appended
  int64_t spec_drafted_ = 0;   // draft tokens verified
  int64_t spec_accepted_ = 0;  // of which matched the model's choice
  double last_accept_length_ = 0.0;
  double last_accept_rate_ = 0.0;
  uint64_t next_seq_id_ = 1;
  int64_t decode_steps_ = 0;
  int64_t tokens_since_log_ = 0;
  std::chrono::steady_clock::time_point last_decode_log_ = std::chrono::steady_clock::now();
  int64_t prompt_tokens_total_ = 0;
  int64_t cached_tokens_total_ = 0;
  double last_gen_throughput_ = 0.0;
  // LogThroughput's counts since its last lines.
  int64_t interval_prompt_tokens_ = 0;
  int64_t interval_output_tokens_ = 0;
  std::chrono::steady_clock::time_point last_throughput_log_ = std::chrono::steady_clock::now();
  // The published leak check is recomputed the next time the engine is idle after this is set
  // (a step ran, or the cache changed).
  bool leak_check_stale_ = true;
  bool paused_ = false;  // /pause_generation: no step is planned until Continue
  // /release_memory_occupation: no step is planned until every released region is resumed.
  MemoryRegions released_;
  bool halted() const { return paused_ || released_.kv_cache || released_.weights; }
  // A weight update waiting for the running requests to finish (admission is held meanwhile).
  struct PendingModel {
    std::shared_ptr<const model::CausalLM> model;
    bool flush_cache = true;
    UpdateModelDone done;
  };
  std::optional<PendingModel> pending_model_;
  int64_t forward_ct_ = 0;  // steps run since start (SGLang's forward count)
  StepProfiler profiler_;
  // --expert-distribution-recorder-mode / --enable-expert-distribution-metrics on an MoE model;
  // null otherwise.
  std::unique_ptr<ExpertRecorder> expert_recorder_;
  StageTimeLog time_cost_;  // --show-time-cost
  std::string leak_check_ = "ok";

  // Shared with other threads.
  mutable std::mutex mutex_;
  mutable std::condition_variable wake_;
  std::deque<Submission> submissions_;
  std::vector<AbortOrder> aborts_;
  mutable std::deque<Command> commands_;
  bool stopping_ = false;
  bool thread_live_ = false;  // the engine thread runs and will execute posted commands
  // Serializes commands run outside the engine thread (after it ended) with its last ones.
  mutable std::mutex inline_mutex_;
  std::atomic<int64_t> waiting_count_{0};  // the scheduler's waiting queue, as of the last step
  // Requests submitted whose final event has not been sent (decremented just before it is).
  std::atomic<int64_t> live_requests_{0};
  EngineStats stats_;
  std::string log_prefix_;      // "[DP<rank>] " with several replicas, else empty
  kv::KvRowsLayout kv_layout_;  // of memory_'s pool, set at construction
  StepProgress progress_;       // read by the watchdog thread
  std::thread thread_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace radixserve::engine

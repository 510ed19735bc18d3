#include "engine/engine_loop.h"

#include "kv/kv_block_hash.h"

#include <malloc.h>

#include <algorithm>
#include <future>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "sampling/token_bitmask.h"

#include "common/log.h"
#include "kernels/kernel_table.h"
#include "spec/kv_view.h"

namespace radixserve::engine {

EngineLoop::EngineLoop(EngineConfig config, std::unique_ptr<kv::KvMemory> memory,
                       std::unique_ptr<sched::Scheduler> scheduler,
                       std::shared_ptr<const model::CausalLM> model,
                       std::shared_ptr<const tokenizer::Tokenizer> tokenizer, ThreadPool* pool,
                       std::shared_ptr<const model::CausalLM> draft_model)
    : config_(std::move(config)),
      memory_(std::move(memory)),
      scheduler_(std::move(scheduler)),
      model_(std::move(model)),
      tokenizer_(std::move(tokenizer)),
      pool_(pool),
      vocab_size_(model_->config().vocab_size),
      logits_processor_(static_cast<int32_t>(vocab_size_)),
      sampler_(static_cast<int32_t>(vocab_size_), kernels::ActiveKernels(), pool),
      seeds_(config_.random_seed, config_.deterministic_inference),
      profiler_(config_.dp_rank) {
  const model::ModelConfig& mc = model_->config();
  kv_view_ = spec::KvViewOf(memory_->pool().storage());
  kv_layout_ = kv::LayoutOf(memory_->pool().storage());
  if (!config_.first_allowed_tokens.empty()) {
    first_token_mask_.assign(sampling::TokenBitmaskWords(static_cast<size_t>(vocab_size_)), 0);
    for (const int32_t id : config_.first_allowed_tokens) {
      first_token_mask_[static_cast<size_t>(id) / 32] |= uint32_t{1} << (id % 32);
    }
  }
  if (!config_.eos_override.empty()) {
    eos_ids_ = config_.eos_override;
  } else {
    for (int64_t id : mc.eos_token_ids) eos_ids_.push_back(static_cast<int32_t>(id));
    if (tokenizer_) {
      for (auto id : tokenizer_->eos_ids()) eos_ids_.push_back(static_cast<int32_t>(id));
    }
  }
  if (config_.dp_size > 1) log_prefix_ = fmt::format("[DP{}] ", config_.dp_rank);
  time_cost_ = StageTimeLog(log_prefix_);
  if (config_.expert_recorder && mc.num_experts > 0) {
    ExpertRecorderOptions options = *config_.expert_recorder;
    options.num_layers = mc.num_layers;
    options.num_experts = mc.num_experts;
    options.num_physical = mc.num_experts + mc.expert_placement.redundant_experts;
    options.top_k = mc.num_experts_per_tok;
    expert_recorder_ = std::make_unique<ExpertRecorder>(options);
  } else if (config_.expert_recorder) {
    RADIX_LOG_WARN("{}--expert-distribution-recorder-mode has no effect: {} has no experts",
                   log_prefix_, mc.architecture);
  }
  if (config_.spec_num_drafts > 0 && config_.spec_draft_model) {
    RADIX_CHECK(draft_model != nullptr && memory_->draft_storage() != nullptr);
    spec::DraftRunnerOptions options;
    options.max_steps = config_.spec_num_drafts;
    options.max_jobs = kMaxDraftingSequences;
    options.mtp = config_.spec_mtp;
    draft_ = std::make_unique<spec::DraftRunner>(std::move(draft_model), memory_->draft_storage(),
                                                 &memory_->pool(), memory_->draft_scratch_row(),
                                                 options);
  } else if (config_.spec_num_drafts > 0) {
    ngram_ = std::make_unique<spec::NgramTable>(config_.ngram);
  }
  PublishStats();
}

EngineLoop::~EngineLoop() { Shutdown(); }

void EngineLoop::Start() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    thread_live_ = true;
  }
  if (kv::HiCache* hicache = memory_->hicache(); hicache != nullptr) {
    hicache->set_notifier([this] { PostCommand([] {}); });  // a finished load wakes the loop
  }
  thread_ = std::thread([this] { Run(); });
  WatchdogOptions watchdog;
  watchdog.hard_timeout_s = config_.watchdog_timeout_s;
  watchdog.soft_timeout_s = config_.soft_watchdog_timeout_s;
  watchdog.name = log_prefix_ + "Scheduler";
  watchdog.describe_state = [this] { return DescribeState(); };
  watchdog_ = std::make_unique<Watchdog>(std::move(watchdog), &progress_);
}

Status EngineLoop::Submit(GenerateRequest request, EventSink sink) {
  if (request.input_ids.empty()) return InvalidArgument("The input_ids is empty.");
  // One bad id would fail the model step of every request batched with it.
  for (int32_t id : request.input_ids) {
    if (id < 0 || id >= vocab_size_) {
      return InvalidArgument("Token id " + std::to_string(id) + " is out of the vocabulary (size " +
                             std::to_string(vocab_size_) + ").");
    }
  }
  if (!config_.long_truncation_mode.empty()) {
    if (Status cut = TruncateLongPrompt(request); !cut.ok()) return cut;
  }
  const auto max_input = config_.max_req_input_len();
  if (static_cast<int64_t>(request.input_ids.size()) >= max_input) {
    if (!config_.allow_auto_truncate) {
      return InvalidArgument("Input length (" + std::to_string(request.input_ids.size()) +
                             " tokens) exceeds the maximum allowed length (" +
                             std::to_string(max_input) +
                             " tokens). Use a shorter input or enable --allow-auto-truncate.");
    }
    request.input_ids.resize(static_cast<size_t>(max_input));
  }
  if (request.priority && !config_.enable_priority_scheduling &&
      config_.abort_on_priority_when_disabled) {
    return Status(StatusCode::kResourceExhausted,
                  "Using priority is disabled for this server. Please send a new request "
                  "without a priority.");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return Status(StatusCode::kResourceExhausted, "The server is shutting down.");
  const auto& limit = config_.sched.max_queued_requests;
  if (limit && !config_.enable_priority_scheduling &&
      static_cast<int64_t>(submissions_.size()) + waiting_count_.load() + 1 > *limit) {
    return Status(StatusCode::kResourceExhausted, "The request queue is full.");
  }
  // The count drops as the final event leaves, before the client can see it.
  live_requests_.fetch_add(1);
  EventSink counted = [this, sink = std::move(sink)](RequestEvent event) {
    if (event.finished) live_requests_.fetch_sub(1);
    sink(std::move(event));
  };
  submissions_.push_back(Submission{std::move(request), std::move(counted)});
  wake_.notify_all();
  return Status::Ok();
}

Status EngineLoop::TruncateLongPrompt(GenerateRequest& request) const {
  const int64_t limit = config_.max_req_len();
  const int64_t max_new = request.sampling.max_new_tokens.value_or(0);
  const auto prompt = static_cast<int64_t>(request.input_ids.size());
  if (prompt + max_new <= limit) return Status::Ok();
  // LightLLM keeps max_req_total_len - max_new_tokens prompt tokens; here the limit is also
  // bounded by SGLang's input rule (max_req_input_len), so the cut prompt is always admitted.
  const int64_t keep = std::min(limit - max_new, config_.max_req_input_len() - 1);
  if (keep <= 0) {
    return InvalidArgument("max_new_tokens (" + std::to_string(max_new) +
                           ") leaves no room for the prompt within the maximum request length (" +
                           std::to_string(limit) + " tokens).");
  }
  std::vector<int32_t>& ids = request.input_ids;
  if (config_.long_truncation_mode == "head") {
    ids.erase(ids.begin(), ids.end() - keep);  // the last `keep` tokens
  } else {
    const int64_t front = keep / 2;
    ids.erase(ids.begin() + front, ids.end() - (keep - front));  // the first and last halves
  }
  return Status::Ok();
}

void EngineLoop::Abort(std::string_view rid, AbortMatch match) {
  std::lock_guard<std::mutex> lock(mutex_);
  aborts_.push_back(AbortOrder{std::string(rid), match});
  wake_.notify_all();
}

void EngineLoop::PostCommand(Command command) const {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!thread_live_) {
    lock.unlock();
    std::lock_guard<std::mutex> inline_lock(inline_mutex_);
    command();
    return;
  }
  commands_.push_back(std::move(command));
  wake_.notify_all();
}

Status EngineLoop::RunOnEngineThread(std::function<Status()> fn) const {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!thread_live_) {
    lock.unlock();
    std::lock_guard<std::mutex> inline_lock(inline_mutex_);
    return fn();
  }
  auto promise = std::make_shared<std::promise<Status>>();
  std::future<Status> result = promise->get_future();
  commands_.push_back([promise, fn = std::move(fn)] { promise->set_value(fn()); });
  wake_.notify_all();
  lock.unlock();
  return result.get();
}

namespace {

// SGLang's refusal of /flush_cache while requests are pending.
Status FlushRefused(std::string_view log_prefix, int64_t queued, int64_t running) {
  const std::string message = fmt::format(
      "Cache not flushed because there are pending requests. #queue-req: {}, "
      "#running-req: {}",
      queued, running);
  RADIX_LOG_WARN("{}{}", log_prefix, message);
  return Status(StatusCode::kResourceExhausted, message);
}

}  // namespace

void EngineLoop::FlushCacheAsync(std::function<void(Status)> done) {
  // A request not finished yet refuses at once (never waiting for a long step to end). Whether
  // the engine is idle otherwise is decided on its thread between steps: the published stats lag
  // a final response the client already holds, the live count does not.
  if (const int64_t live = live_requests_.load(); live > 0) {
    int64_t queued = 0, running = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queued = stats_.num_queued_reqs + static_cast<int64_t>(submissions_.size());
      running = stats_.num_running_reqs;
    }
    if (queued + running == 0) running = live;
    done(FlushRefused(log_prefix_, queued, running));
    return;
  }
  PostCommand([this, done = std::move(done)] {
    if (!scheduler_->idle()) {
      done(FlushRefused(log_prefix_, static_cast<int64_t>(scheduler_->waiting().size()),
                        static_cast<int64_t>(scheduler_->running().size())));
      return;
    }
    Status flushed = memory_->Flush();
    if (flushed.ok()) RADIX_LOG_INFO("{}Cache flushed successfully!", log_prefix_);
    leak_check_stale_ = true;
    PublishStats();
    done(std::move(flushed));
  });
}

void EngineLoop::PauseAsync(PauseMode mode, std::function<void()> done) {
  // Aborts drain before commands, so every request submitted before this call ends first.
  if (mode == PauseMode::kAbort) Abort("", AbortMatch::kRidPrefix);
  PostCommand([this, mode, done = std::move(done)] {
    AbortFlagged();
    if (mode == PauseMode::kRetract) {
      const size_t moved = scheduler_->RetractAll();
      if (moved > 0) leak_check_stale_ = true;
      RADIX_LOG_INFO("{}Generation paused; {} running request(s) retracted to the queue.",
                     log_prefix_, moved);
    } else {
      RADIX_LOG_INFO("{}Generation paused ({}).", log_prefix_,
                     mode == PauseMode::kAbort ? "abort" : "in_place");
    }
    paused_ = true;
    PublishStats();
    done();
  });
}

void EngineLoop::UpdateModelAsync(std::shared_ptr<const model::CausalLM> model, bool flush_cache,
                                  UpdateModelDone done) {
  PostCommand([this, model = std::move(model), flush_cache, done = std::move(done)]() mutable {
    if (pending_model_) {
      done(Status(StatusCode::kResourceExhausted, "Another weight update is in progress."), 0);
      return;
    }
    pending_model_ = PendingModel{std::move(model), flush_cache, std::move(done)};
    scheduler_->set_admission_held(true);
    RADIX_LOG_INFO("{}Weight update: holding admission until {} running request(s) finish.",
                   log_prefix_, scheduler_->running().size());
    MaybeSwapModel();
  });
}

void EngineLoop::MaybeSwapModel() {
  if (!pending_model_) return;
  if (!paused_ && (!scheduler_->running().empty() || scheduler_->chunked() != nullptr)) return;
  PendingModel pending = std::move(*pending_model_);
  pending_model_.reset();
  model_ = std::move(pending.model);
  if (kv::HiCache* hicache = memory_->hicache(); hicache != nullptr) {
    // Stored KV came from the old weights: the new ones key their blocks apart.
    hicache->SetModelTag(kv::HashString(hicache->options().model_tag, "new weights"));
  }
  released_.weights = false;  // new weights serve: nothing left to resume for them
  std::string note;
  if (pending.flush_cache) {
    // The cached KV came from the old weights. Waiting sequences hold no KV (a held admission
    // let none in; retracted ones gave theirs to the cache), so the cache can go, unless a
    // paused engine still holds running sequences.
    Status flushed = FlushCacheUnderWaiting();
    if (!flushed.ok()) {
      // Only a paused engine swaps with sequences still holding KV: they keep it (and the cache
      // keeps what they hold) until they finish.
      note = " The prefix cache was not flushed: " + flushed.message();
    }
  }
  const auto held = static_cast<int64_t>(scheduler_->waiting().size());
  scheduler_->set_admission_held(false);
  if (note.empty()) {
    RADIX_LOG_INFO("{}Weights updated; {} queued request(s) resume.", log_prefix_, held);
  } else {
    RADIX_LOG_WARN("{}Weights updated; {} queued request(s) resume.{}", log_prefix_, held, note);
  }
  PublishStats();
  pending.done(Status::Ok(), held);
}

Status EngineLoop::FlushCacheUnderWaiting() {
  for (sched::Sequence* seq : scheduler_->waiting()) ReleaseTransferredPrefix(seq);
  RADIX_RETURN_IF_ERROR(memory_->Flush());
  for (sched::Sequence* seq : scheduler_->waiting()) seq->match = {};
  leak_check_stale_ = true;
  return Status::Ok();
}

void EngineLoop::Continue() {
  PostCommand([this] {
    if (!paused_) return;
    paused_ = false;
    RADIX_LOG_INFO("{}Generation continued.", log_prefix_);
    PublishStats();
  });
}

void EngineLoop::ReleaseMemoryAsync(MemoryRegions regions, std::function<void(Status)> done) {
  PostCommand([this, regions, done = std::move(done)] {
    AbortFlagged();
    // SGLang's condition: nothing running; queued requests only on a paused engine (they hold no
    // KV: a retract pause gave theirs to the cache, which the flush drops).
    const bool running = !scheduler_->running().empty() || scheduler_->chunked() != nullptr;
    if (running || pending_model_ || (!paused_ && !scheduler_->waiting().empty())) {
      PublishStats();  // the caller may read why: the requests just taken in
      done(Status(StatusCode::kInvalidArgument,
                  "release_memory_occupation should be called only when server is idle."));
      return;
    }
    if (regions.kv_cache && !released_.kv_cache) {
      // Flush returns the freed pool pages to the OS; no step commits them again until resumed.
      Status flushed = FlushCacheUnderWaiting();
      if (!flushed.ok()) {
        done(std::move(flushed));
        return;
      }
      released_.kv_cache = true;
    }
    if (regions.weights && !released_.weights) {
      model_.reset();
      released_.weights = true;
    }
    RADIX_LOG_INFO("{}Memory released (kv_cache: {}, weights: {}); no step runs until resumed.",
                   log_prefix_, released_.kv_cache, released_.weights);
    PublishStats();
    done(Status::Ok());
  });
}

void EngineLoop::ResumeMemoryAsync(MemoryRegions regions,
                                   std::shared_ptr<const model::CausalLM> model,
                                   std::function<void(Status)> done) {
  PostCommand([this, regions, model = std::move(model), done = std::move(done)]() mutable {
    const char* not_released = (regions.kv_cache && !released_.kv_cache) ? "kv_cache"
                               : (regions.weights && !released_.weights) ? "weights"
                                                                         : nullptr;
    if (not_released != nullptr) {
      done(Status(StatusCode::kInvalidArgument,
                  fmt::format("'{}' is not released; nothing to resume.", not_released)));
      return;
    }
    if (regions.weights) {
      RADIX_CHECK(model != nullptr);
      model_ = std::move(model);
      released_.weights = false;
    }
    if (regions.kv_cache) released_.kv_cache = false;
    RADIX_LOG_INFO("{}Memory resumed (kv_cache: {}, weights: {}){}.", log_prefix_, regions.kv_cache,
                   regions.weights, halted() ? "; still halted" : "; scheduling resumes");
    PublishStats();
    done(Status::Ok());
  });
}

void EngineLoop::StartProfileAsync(ProfileOptions options, TraceSink sink,
                                   std::function<void(Status)> started) {
  PostCommand([this, options = std::move(options), sink = std::move(sink),
               started = std::move(started)]() mutable {
    Status status = profiler_.Start(std::move(options), forward_ct_, std::move(sink));
    if (status.ok()) RADIX_LOG_INFO("{}Profiling starts.", log_prefix_);
    started(std::move(status));
  });
}

void EngineLoop::ProfileStep(const sched::StepPlan& plan, const char* stage,
                             StepProfiler::Clock::time_point start) {
  StepRecord record;
  record.forward_ct = forward_ct_;
  record.stage = stage;
  record.duration_us =
      std::chrono::duration_cast<std::chrono::microseconds>(StepProfiler::Clock::now() - start)
          .count();
  record.num_seqs = static_cast<int64_t>(plan.entries.size());
  record.num_tokens = static_cast<int64_t>(plan.num_tokens());
  record.cached_tokens = static_cast<int64_t>(plan.cached_tokens);
  if (profiler_.detailed()) {
    record.queued_reqs = static_cast<int64_t>(scheduler_->waiting().size());
    record.running_reqs = static_cast<int64_t>(scheduler_->num_sequences()) - *record.queued_reqs;
    record.token_usage = memory_->token_usage();
  }
  profiler_.Record(std::move(record), start);
}

void EngineLoop::StopProfileAsync(std::function<void(Status)> stopped) {
  PostCommand([this, stopped = std::move(stopped)] { stopped(profiler_.Stop()); });
}

void EngineLoop::ExpertRecordAsync(ExpertRecordAction action, ExpertRecordDone done) {
  PostCommand([this, action, done = std::move(done)] {
    if (expert_recorder_ == nullptr) {
      return done(InvalidArgument(
          model_->config().num_experts == 0
              ? "This server records no expert distribution: " + model_->config().architecture +
                    " has no experts."
              : std::string("Please set --expert-distribution-recorder-mode to use the expert "
                            "distribution recorder.")));
    }
    std::vector<ExpertDump> dumps;
    switch (action) {
      case ExpertRecordAction::kStart:
        expert_recorder_->Start(log_prefix_);
        break;
      case ExpertRecordAction::kStop:
        expert_recorder_->Stop(log_prefix_);
        break;
      case ExpertRecordAction::kDump:
        dumps.push_back(expert_recorder_->TakeDump(static_cast<int>(config_.dp_rank)));
        break;
    }
    done(std::move(dumps));
  });
}

Status EngineLoop::CheckLeaks() const {
  return RunOnEngineThread([this]() -> Status {
    if (!scheduler_->idle()) return Status::Ok();
    return memory_->CheckIdle();
  });
}

EngineStats EngineLoop::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  EngineStats stats = stats_;
  // Submissions the loop has not drained yet are queued too (a long step can hold thousands).
  stats.num_queued_reqs += static_cast<int64_t>(submissions_.size());
  return stats;
}

void EngineLoop::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  if (watchdog_) watchdog_->Stop();
  // The storage tier's I/O thread outlives this object's mutex otherwise.
  if (memory_ && memory_->hicache() != nullptr) memory_->hicache()->set_notifier(nullptr);
}

// How long the engine stays idle after work before it gives the freed heap back (Run).
constexpr std::chrono::milliseconds kTrimAfterIdle{20};

void EngineLoop::Run() {
  int64_t continuous_decodes = 0;
  int64_t decodes_since_drain = 0;
  // Steps ran since the freed heap was last given back; when the engine last went idle.
  bool trim_due = false, idle = false;
  auto idle_since = std::chrono::steady_clock::now();
  while (true) {
    progress_.Begin();
    if (continuous_decodes % config_.num_continuous_decode_steps == 0 &&
        (continuous_decodes == 0 || decodes_since_drain >= config_.scheduler_recv_interval)) {
      decodes_since_drain = 0;
      if (DrainInbox()) break;
    }
    const StepProfiler::Clock::time_point schedule_start = StepProfiler::Clock::now();
    AbortFlagged();
    MaybeSwapModel();
    if (speculating() && !halted()) ProposeDrafts();
    PollPrefetches();
    sched::StepPlan plan = halted() ? sched::StepPlan{} : scheduler_->PlanStep();
    for (const sched::StepEntry& entry : plan.entries) {
      if (entry.seq->prefetch_op != 0 || entry.seq->transferred_prefix != nullptr) {
        ReleasePrefixHolds(entry.seq, &StateOf(entry.seq));
      }
    }
    for (const sched::DroppedSeq& dropped : plan.dropped) {
      if (dropped.reason == sched::DropReason::kOutOfMemory) {
        FinishSequence(dropped.seq, AbortFinish("Out of KV cache memory for this request.", 500),
                       /*cache_kv=*/true);
      }
    }
    if (plan.empty()) {
      continuous_decodes = 0;
      PublishStats();
      progress_.End();
      // Idle after work: the responses' event strings (a stream with cumulative top logprobs
      // builds tens of MB of them) are freed, but glibc keeps the freed heap pages resident. Give
      // them back once the engine has been idle for a moment: malloc_trim holds the allocator's
      // arena locks while it walks the heap, which must not delay the HTTP threads' delivery of
      // the last step's events. (A paused engine sleeps without trimming.)
      const auto now = std::chrono::steady_clock::now();
      if (!idle) {
        idle = true;
        idle_since = now;
      }
      if (trim_due && !halted() && now - idle_since >= kTrimAfterIdle) {
        malloc_trim(0);
        trim_due = false;
      }
      std::unique_lock<std::mutex> lock(mutex_);
      const auto has_work = [this] {
        return stopping_ || !submissions_.empty() || !aborts_.empty() || !commands_.empty();
      };
      if (halted() || (config_.sleep_on_idle && scheduler_->idle())) {
        wake_.wait(lock, has_work);
      } else {
        wake_.wait_for(lock, std::chrono::milliseconds(1), has_work);
      }
      continue;
    }
    trim_due = true;
    idle = false;
    progress_.SetBatch(DescribePlan(plan));
    PublishStats();  // what was just admitted and planned, visible while the step runs
    const char* stage = plan.kind == sched::StepKind::kDecode  ? "decode"
                        : plan.kind == sched::StepKind::kMixed ? "mixed"
                                                               : "prefill";
    const bool profiled = profiler_.Wants(forward_ct_, stage);
    const StepProfiler::Clock::time_point step_start = StepProfiler::Clock::now();
    if (config_.show_time_cost) time_cost_.Add("schedule", step_start - schedule_start);
    RunStep(plan);
    if (profiled) ProfileStep(plan, stage, step_start);
    if (config_.show_time_cost) time_cost_.Add(stage, StepProfiler::Clock::now() - step_start);
    ++forward_ct_;
    const bool decode = plan.kind == sched::StepKind::kDecode;
    continuous_decodes = decode ? continuous_decodes + 1 : 0;
    decodes_since_drain = decode ? decodes_since_drain + 1 : 0;
    PublishStats();
    progress_.End();
  }
  progress_.End();
  // Shutdown: everything still held ends with an abort.
  if (pending_model_) {
    pending_model_->done(Status(StatusCode::kResourceExhausted, "The server is shutting down."), 0);
    pending_model_.reset();
  }
  const FinishReason shutdown = AbortFinish("The server is shutting down.", 503);
  for (sched::Sequence* seq : HeldInArrivalOrder()) FinishSequence(seq, shutdown, true);
  PublishStats();
  std::lock_guard<std::mutex> inline_lock(inline_mutex_);
  std::deque<Submission> left;
  std::deque<Command> commands;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(submissions_);
    commands.swap(commands_);
    thread_live_ = false;  // later commands run on their caller's thread
  }
  for (Command& command : commands) command();
  for (Submission& s : left) {
    RequestEvent event;
    event.finished = true;
    event.finish_reason = shutdown;
    event.prompt_tokens = static_cast<int64_t>(s.request.input_ids.size());
    s.sink(std::move(event));
  }
  PublishStats();
}

bool EngineLoop::DrainInbox() {
  std::deque<Submission> submissions;
  std::vector<AbortOrder> aborts;
  std::deque<Command> commands;
  bool stopping;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    submissions.swap(submissions_);
    aborts.swap(aborts_);
    commands.swap(commands_);
    stopping = stopping_;
  }
  for (Submission& s : submissions) AdmitSubmission(std::move(s));
  for (const AbortOrder& order : aborts) AbortMatching(order);
  for (Command& command : commands) command();
  return stopping;
}

void EngineLoop::AdmitSubmission(Submission submission) {
  GenerateRequest& request = submission.request;
  sched::Sequence seq;
  seq.id = next_seq_id_++;
  seq.rid = request.rid;
  // The namespace starts with the adapter's load id ("B" for the base model), so no cache_salt
  // or extra_key a client sends can reach another adapter's prefixes.
  std::string ns = "B";
  if (request.lora) {
    ns = "L";
    ns += std::to_string(request.lora->id);
    ns += ':';
  }
  seq.extra_key = ns + request.extra_key;
  seq.lora_id = request.lora ? request.lora->id : 0;
  seq.input_ids = request.input_ids;
  const int64_t limit = config_.max_req_len() - static_cast<int64_t>(request.input_ids.size()) - 1;
  seq.max_new_tokens = std::min(request.sampling.max_new_tokens.value_or(int64_t{1} << 30), limit);
  seq.max_new_tokens = std::max<int64_t>(seq.max_new_tokens, 0);
  if (config_.enable_priority_scheduling) {
    const int64_t lowest = config_.sched.schedule_low_priority_values_first
                               ? std::numeric_limits<int64_t>::max()
                               : std::numeric_limits<int64_t>::min();
    seq.priority = request.priority.value_or(lowest);
  }
  seq.ignore_eos = request.sampling.ignore_eos;
  seq.return_logprob = request.return_logprob;
  seq.no_prefix_match = request.return_hidden_states;
  if (request.return_logprob && request.logprob_start_len >= 0) {
    seq.logprob_start_len = static_cast<size_t>(request.logprob_start_len);
  }
  // The state keeps the request with max_new_tokens capped by the context (finish checks).
  request.sampling.max_new_tokens = seq.max_new_tokens;
  const uint64_t seed = seeds_.SeedFor(request.sampling.sampling_seed);
  auto record = std::make_unique<ActiveRequest>(std::move(seq), std::move(submission.request),
                                                std::move(submission.sink), tokenizer_.get(), seed,
                                                config_.stream_interval);
  RequestState& state = record->state;
  if (speculating()) state.EnableSpecCount();
  if (config_.log_request_time_stats) state.EnableTimeStatsLog(log_prefix_);
  sched::Sequence* placed = &record->seq;
  sched::Sequence* displaced = nullptr;
  Status status = scheduler_->Enqueue(placed, &displaced);
  if (!status.ok()) {
    state.Finish(AbortFinish(status.message(), 503), 0, 0);
    return;
  }
  prompt_tokens_total_ += static_cast<int64_t>(placed->input_ids.size());
  if (memory_->hicache() != nullptr) state.set_storage_cached_tokens(0);
  requests_.emplace(placed->id, std::move(record));
  if (displaced != nullptr) {
    EndHandedBack(displaced,
                  AbortFinish("The request is aborted by a higher priority request.", 503));
  }
  if (state.request().prefilled_kv && !InsertPrefilledKv(placed, state)) return;
  StartPrefetch(placed);
}

void EngineLoop::EndHandedBack(sched::Sequence* seq, FinishReason reason) {
  RADIX_CHECK(!seq->held);
  ReleasePrefixHolds(seq, nullptr);
  auto it = requests_.find(seq->id);
  RADIX_CHECK(it != requests_.end());
  it->second->state.Finish(std::move(reason), 0, 0);
  requests_.erase(it);
}

std::vector<sched::Sequence*> EngineLoop::HeldInArrivalOrder() const {
  std::vector<sched::Sequence*> held;
  held.reserve(requests_.size());
  for (const auto& [id, record] : requests_) held.push_back(&record->seq);
  std::sort(held.begin(), held.end(),
            [](const sched::Sequence* a, const sched::Sequence* b) { return a->id < b->id; });
  return held;
}

void EngineLoop::AbortMatching(const AbortOrder& order) {
  leak_check_stale_ = true;
  const auto matches = [&](const sched::Sequence& seq) {
    if (order.match == AbortMatch::kExactRid) return seq.rid == order.rid;
    return seq.rid.compare(0, order.rid.size(), order.rid) == 0;
  };
  for (sched::Sequence* seq : scheduler_->TakeWaiting(matches)) {
    EndHandedBack(seq, AbortFinish("Abort in waiting queue"));
  }
  for (auto& [id, record] : requests_) {
    if (!matches(record->seq)) continue;
    record->abort_requested = true;
    abort_pending_ = true;
  }
}

void EngineLoop::AbortFlagged() {
  if (!abort_pending_) return;
  abort_pending_ = false;
  for (sched::Sequence* seq : HeldInArrivalOrder()) {
    if (requests_.at(seq->id)->abort_requested) {
      FinishSequence(seq, AbortFinish("Aborted"), /*cache_kv=*/true);
    }
  }
}

void EngineLoop::FinishSequence(sched::Sequence* seq, FinishReason reason, bool cache_kv) {
  ReleasePrefixHolds(seq, nullptr);
  StateOf(seq).Finish(std::move(reason), static_cast<int64_t>(seq->output_ids.size()),
                      static_cast<int64_t>(seq->cached_tokens));
  EndRequest(seq, cache_kv);
}

void EngineLoop::EndRequest(sched::Sequence* seq, bool cache_kv) {
  auto it = requests_.find(seq->id);
  RADIX_CHECK(it != requests_.end());
  RADIX_CHECK_MSG(it->second->state.finished(), "ending a request before its final event");
  scheduler_->Release(seq, cache_kv);
  requests_.erase(it);
}

}  // namespace radixserve::engine

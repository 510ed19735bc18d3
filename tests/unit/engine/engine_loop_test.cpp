// EngineLoop end to end on stories260K: batching, chunking, paging, prefix caching and retraction
// never change greedy outputs (compared with ReferenceGreedy, which runs each request alone
// straight through the model); the leak check holds after every run.
// GCC 12 reports a false -Wrestrict inside std::string operator+ at -O3 (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <mutex>
#include <tuple>

#include "engine/engine_loop.h"
#include "engine_test_util.h"

namespace radixserve::engine {
namespace {

using testing::Collector;

// 64 distinct prompts over 3 shared openings, so the radix cache and lpm see real sharing.
std::vector<std::vector<int32_t>> SharedPrefixPrompts() {
  const tokenizer::Tokenizer& tok = *testing::LoadStories().tokenizer;
  const std::vector<std::string> openings = {
      "Once upon a time, there was a little girl named Lily. She liked to play",
      "One day, a big dog went to the park with his friend. They", "Tom had a red ball."};
  const std::vector<std::string> endings = {
      "",     " in the sun",         " and", " with a toy. She was happy",
      " but", " when the rain came", " so",  " very much. One day"};
  std::vector<std::vector<int32_t>> prompts;
  const std::vector<std::string> tails = {"", " and then", " but then"};
  for (size_t i = 0; i < 64; ++i) {
    const std::string text = openings[i % 3] + endings[(i / 3) % endings.size()] + tails[i / 24];
    std::vector<int32_t> ids;
    for (auto id : tok.Encode(text)) ids.push_back(static_cast<int32_t>(id));
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

// The text of `output` as a continuation of `prompt`: decode(prompt + output) minus
// decode(prompt) (SentencePiece keeps the leading space of a continuation, unlike a lone decode).
std::string ContinuationText(const std::vector<int32_t>& prompt,
                             const std::vector<int32_t>& output) {
  const auto& tok = *testing::LoadStories().tokenizer;
  std::vector<tokenizer::TokenId> head(prompt.begin(), prompt.end());
  std::vector<tokenizer::TokenId> all = head;
  all.insert(all.end(), output.begin(), output.end());
  const std::string prefix = tok.Decode(head);
  const std::string full = tok.Decode(all);
  EXPECT_EQ(full.compare(0, prefix.size(), prefix), 0);
  return full.substr(prefix.size());
}

const std::vector<std::vector<int32_t>>& References(int64_t max_new) {
  static std::map<int64_t, std::vector<std::vector<int32_t>>> cache;
  auto& refs = cache[max_new];
  if (refs.empty()) {
    for (const auto& p : SharedPrefixPrompts())
      refs.push_back(testing::ReferenceGreedy(p, max_new));
  }
  return refs;
}

// Returns the sum of the requests' cached_tokens.
int64_t RunAndCompare(const args::ServerArgs& args, int64_t max_new,
                      int64_t* retractions = nullptr) {
  const auto prompts = SharedPrefixPrompts();
  const auto& refs = References(max_new);
  auto engine = testing::MakeEngine(args);
  Collector collector(prompts.size());
  // One request per opening first, so that the rest can find their prefixes in the cache, then
  // the other 61 at once.
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(engine
                    ->Submit(testing::GreedyRequest("r" + std::to_string(i), prompts[i], max_new),
                             collector.Sink(i))
                    .ok());
    if (i == 2) collector.Wait(3);
  }
  collector.Wait(prompts.size());
  int64_t cached = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(collector[i].finish.has_value());
    if (collector[i].finish) {
      EXPECT_EQ(collector[i].finish->kind, FinishKind::kLength) << i;
    }
    EXPECT_EQ(collector[i].tokens, refs[i]) << "request " << i;
    cached += collector[i].cached_tokens;
  }
  const Status leaks = engine->CheckLeaks();
  EXPECT_TRUE(leaks.ok()) << leaks.message();
  if (retractions != nullptr) *retractions = engine->Stats().num_retractions;
  engine->Shutdown();
  return cached;
}

class EngineMatrixTest
    : public ::testing::TestWithParam<std::tuple<int /*page*/, int /*chunk*/, bool /*radix*/>> {};

TEST_P(EngineMatrixTest, ConcurrentGreedyEqualsAlone) {
  const auto [page, chunk, radix] = GetParam();
  args::ServerArgs args = testing::BaseArgs();
  args.Set("page-size", page);
  args.Set("chunked-prefill-size", chunk);
  args.Set("disable-radix-cache", !radix);
  args.Set("schedule-policy", radix ? "lpm" : "fcfs");
  args.Set("enable-deterministic-inference", true);
  const int64_t cached = RunAndCompare(args, 24);
  if (radix) {
    EXPECT_GT(cached, 0);
  } else {
    EXPECT_EQ(cached, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(PagesChunksRadix, EngineMatrixTest,
                         ::testing::Combine(::testing::Values(1, 16), ::testing::Values(64, 4096),
                                            ::testing::Bool()));

TEST(EngineLoopTest, SmallPoolForcesRetractionAndAllComplete) {
  args::ServerArgs args = testing::BaseArgs();
  args.Set("max-total-tokens", 640);
  args.Set("chunked-prefill-size", 64);
  args.Set("schedule-conservativeness", 0.05);
  int64_t retractions = 0;
  RunAndCompare(args, 40, &retractions);
  EXPECT_GT(retractions, 0);
}

TEST(EngineLoopTest, MixedChunkContinuousDecodeAndOtherPoliciesKeepOutputs) {
  for (const char* policy : {"dfs-weight", "lof", "random"}) {
    args::ServerArgs args = testing::BaseArgs();
    args.Set("chunked-prefill-size", 64);
    args.Set("enable-mixed-chunk", true);
    args.Set("num-continuous-decode-steps", 3);
    args.Set("schedule-policy", policy);
    args.Set("page-size", 16);
    RunAndCompare(args, 24);
  }
}

TEST(EngineLoopTest, PrioritySchedulingWithSmallBatchKeepsOutputs) {
  args::ServerArgs args = testing::BaseArgs();
  args.Set("enable-priority-scheduling", true);
  args.Set("max-running-requests", 8);
  RunAndCompare(args, 24);
}

TEST(EngineLoopTest, SharedPrefixReportsCachedTokens) {
  const auto prompts = SharedPrefixPrompts();
  auto engine = testing::MakeEngine(testing::BaseArgs());
  // prompts[0] and prompts[3] share the first opening; run them one after the other.
  Collector first(1);
  ASSERT_TRUE(engine->Submit(testing::GreedyRequest("a", prompts[0], 8), first.Sink(0)).ok());
  first.Wait(1);
  EXPECT_EQ(first[0].cached_tokens, 0);
  Collector second(1);
  ASSERT_TRUE(engine->Submit(testing::GreedyRequest("b", prompts[3], 8), second.Sink(0)).ok());
  second.Wait(1);
  // The cache holds the first request's prompt and all but its last output token.
  std::vector<int32_t> cached = prompts[0];
  cached.insert(cached.end(), first[0].tokens.begin(), first[0].tokens.end() - 1);
  size_t common = 0;
  while (common < cached.size() && common < prompts[3].size() &&
         cached[common] == prompts[3][common]) {
    ++common;
  }
  common = std::min(common, prompts[3].size() - 1);
  ASSERT_GT(common, 5u);
  EXPECT_EQ(second[0].cached_tokens, static_cast<int64_t>(common));
  EXPECT_GT(engine->Stats().cached_tokens, 0);
  EXPECT_TRUE(engine->CheckLeaks().ok());
}

TEST(EngineLoopTest, TextMatchesTokenizerDecode) {
  const auto prompts = SharedPrefixPrompts();
  auto engine = testing::MakeEngine(testing::BaseArgs());
  Collector collector(1);
  GenerateRequest request = testing::GreedyRequest("t", prompts[0], 16);
  request.stream = true;
  ASSERT_TRUE(engine->Submit(std::move(request), collector.Sink(0)).ok());
  collector.Wait(1);
  EXPECT_EQ(collector[0].text, ContinuationText(prompts[0], collector[0].tokens));
  // Streaming with interval 1: one event per token.
  EXPECT_EQ(collector[0].events.size(), 16u);
}

TEST(EngineLoopTest, StopStringEndsRequestAndIsTrimmed) {
  const auto prompts = SharedPrefixPrompts();
  const auto& ref = References(24)[0];
  const std::string full = ContinuationText(prompts[0], ref);
  ASSERT_GT(full.size(), 12u);
  const std::string stop = full.substr(8, 3);
  auto engine = testing::MakeEngine(testing::BaseArgs());
  Collector collector(1);
  GenerateRequest request = testing::GreedyRequest("s", prompts[0], 24);
  request.sampling.stop = {stop};
  ASSERT_TRUE(engine->Submit(std::move(request), collector.Sink(0)).ok());
  collector.Wait(1);
  ASSERT_TRUE(collector[0].finish.has_value());
  EXPECT_EQ(collector[0].finish->kind, FinishKind::kStop);
  EXPECT_EQ(collector[0].finish->matched_str, stop);
  EXPECT_EQ(collector[0].text, full.substr(0, full.find(stop)));
  EXPECT_TRUE(engine->CheckLeaks().ok());
}

TEST(EngineLoopTest, PromptTooLongIsRejectedOrTruncated) {
  auto engine = testing::MakeEngine(testing::BaseArgs());
  const int64_t context = testing::LoadStories().model->config().context_length;
  std::vector<int32_t> prompt(static_cast<size_t>(context), 100);
  Collector collector(1);
  Status status = engine->Submit(testing::GreedyRequest("long", prompt, 4), collector.Sink(0));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("exceeds the maximum allowed length"), std::string::npos);

  args::ServerArgs args = testing::BaseArgs();
  args.Set("allow-auto-truncate", true);
  auto truncating = testing::MakeEngine(args);
  ASSERT_TRUE(
      truncating->Submit(testing::GreedyRequest("long", prompt, 4), collector.Sink(0)).ok());
  collector.Wait(1);
  EXPECT_EQ(collector[0].events.back().prompt_tokens, context - 1 - 5);
}

TEST(EngineLoopTest, AbortByPrefixEndsRequestsAndFreesKv) {
  const auto prompts = SharedPrefixPrompts();
  auto engine = testing::MakeEngine(testing::BaseArgs());
  Collector collector(8);
  for (size_t i = 0; i < 8; ++i) {
    std::string rid(i < 4 ? "drop" : "keep");
    rid.append(1, static_cast<char>('0' + i));
    ASSERT_TRUE(
        engine->Submit(testing::GreedyRequest(rid, prompts[i], i < 4 ? 400 : 8), collector.Sink(i))
            .ok());
  }
  engine->Abort("drop", AbortMatch::kRidPrefix);
  collector.Wait(8);
  for (size_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(collector[i].finish.has_value());
    EXPECT_EQ(collector[i].finish->kind, i < 4 ? FinishKind::kAbort : FinishKind::kLength) << i;
  }
  EXPECT_TRUE(engine->CheckLeaks().ok());
  EXPECT_TRUE(engine->FlushCache().ok());
  EXPECT_EQ(engine->Stats().cached_tokens, 0);
}

TEST(EngineLoopTest, FlushRightAfterTheLastResponseSucceeds) {
  // The final event reaches its sink before the step that produced it publishes its stats; a
  // flush sent the moment it arrives finds the engine idle.
  const auto prompts = SharedPrefixPrompts();
  auto engine = testing::MakeEngine(testing::BaseArgs());
  for (int round = 0; round < 16; ++round) {
    Collector collector(1);
    ASSERT_TRUE(engine
                    ->Submit(testing::GreedyRequest("f" + std::to_string(round),
                                                    prompts[static_cast<size_t>(round)], 2),
                             collector.Sink(0))
                    .ok());
    collector.Wait(1);
    const Status flushed = engine->FlushCache();
    EXPECT_TRUE(flushed.ok()) << round << ": " << flushed.message();
  }
  EXPECT_EQ(engine->Stats().cached_tokens, 0);
}

TEST(EngineLoopTest, QueueFullIsRejected) {
  args::ServerArgs args = testing::BaseArgs();
  args.Set("max-queued-requests", 1);
  auto engine = testing::MakeEngine(args);
  const auto prompts = SharedPrefixPrompts();
  Collector collector(64);
  size_t accepted = 0;
  size_t rejected = 0;
  for (size_t i = 0; i < 64; ++i) {
    Status s = engine->Submit(testing::GreedyRequest("q" + std::to_string(i), prompts[i % 48], 4),
                              collector.Sink(i));
    if (s.ok()) {
      ++accepted;
    } else {
      EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
      EXPECT_EQ(s.message(), "The request queue is full.");
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0u);
  collector.Wait(accepted);
  EXPECT_TRUE(engine->CheckLeaks().ok());
}

TEST(EngineLoopTest, ShutdownAbortsInFlightRequestsAndFlushWaitsForIdle) {
  const auto prompts = SharedPrefixPrompts();
  auto engine = testing::MakeEngine(testing::BaseArgs());
  Collector collector(4);
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(engine
                    ->Submit(testing::GreedyRequest("x" + std::to_string(i), prompts[i], 450),
                             collector.Sink(i))
                    .ok());
  }
  // Busy (or about to be): a flush is refused while anything is queued or running.
  const Status busy_flush = engine->FlushCache();
  EXPECT_EQ(busy_flush.code(), StatusCode::kResourceExhausted);
  engine->Shutdown();
  collector.Wait(4);
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(collector[i].finish.has_value());
    // Whatever had not finished by the time of the shutdown ends with the shutdown abort.
    if (collector[i].finish->kind != FinishKind::kLength) {
      EXPECT_EQ(collector[i].finish->kind, FinishKind::kAbort);
      EXPECT_EQ(collector[i].finish->status_code, 503);
      EXPECT_EQ(collector[i].finish->message, "The server is shutting down.");
    }
  }
  EXPECT_EQ(engine->Submit(testing::GreedyRequest("late", prompts[0], 4), collector.Sink(0)).code(),
            StatusCode::kResourceExhausted);
  const Status leaks = engine->CheckLeaks();
  EXPECT_TRUE(leaks.ok()) << leaks.message();
}

// Waits for PauseAsync: when it returns, the engine runs no step until Continue.
void PauseSync(Engine& engine, PauseMode mode) {
  std::promise<void> paused;
  engine.PauseAsync(mode, [&paused] { paused.set_value(); });
  paused.get_future().wait();
}

std::vector<size_t> TokenCounts(const Collector& collector, size_t n) {
  std::vector<size_t> counts;
  for (size_t i = 0; i < n; ++i) counts.push_back(collector[i].tokens.size());
  return counts;
}

class PauseTest : public ::testing::TestWithParam<PauseMode> {};

TEST_P(PauseTest, NoStepRunsWhilePausedAndContinuingKeepsTheGreedyOutputs) {
  const auto prompts = SharedPrefixPrompts();
  auto engine = testing::MakeEngine(testing::BaseArgs());
  constexpr size_t kRequests = 4;
  constexpr int64_t kMaxNew = 24;
  Collector collector(kRequests + 1);
  for (size_t i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(engine
                    ->Submit(testing::GreedyRequest("p" + std::to_string(i), prompts[i], kMaxNew),
                             collector.Sink(i))
                    .ok());
  }
  PauseSync(*engine, GetParam());
  EXPECT_TRUE(engine->Stats().paused);
  // A request submitted while paused waits; a second pause is a command that runs after the
  // inbox (and so that submission) was taken in, with no step in between.
  const std::vector<size_t> held = TokenCounts(collector, kRequests);
  ASSERT_TRUE(
      engine->Submit(testing::GreedyRequest("late", prompts[5], 6), collector.Sink(kRequests))
          .ok());
  PauseSync(*engine, GetParam());
  EXPECT_EQ(TokenCounts(collector, kRequests), held);
  EXPECT_TRUE(collector[kRequests].tokens.empty());
  const EngineStats stats = engine->Stats();
  EXPECT_GE(stats.num_queued_reqs, 1);
  if (GetParam() == PauseMode::kRetract) {
    EXPECT_EQ(stats.used_tokens, 0);
  }
  engine->Continue();
  collector.Wait(kRequests + 1);
  for (size_t i = 0; i < kRequests; ++i) {
    EXPECT_EQ(collector[i].tokens, testing::ReferenceGreedy(prompts[i], kMaxNew)) << i;
  }
  EXPECT_EQ(collector[kRequests].tokens, testing::ReferenceGreedy(prompts[5], 6));
  EXPECT_FALSE(engine->Stats().paused);
  Status leaks = engine->CheckLeaks();
  EXPECT_TRUE(leaks.ok()) << leaks.message();
}

INSTANTIATE_TEST_SUITE_P(Modes, PauseTest,
                         ::testing::Values(PauseMode::kRetract, PauseMode::kInPlace));

// With priority scheduling a full queue makes room for a more important newcomer: the least
// important queued request ends with SGLang's abort, the newcomer runs, and nothing leaks.
TEST(EngineLoopTest, AMoreImportantRequestDisplacesTheLeastImportantQueuedOne) {
  const auto prompts = SharedPrefixPrompts();
  args::ServerArgs args = testing::BaseArgs();
  args.Set("enable-priority-scheduling", true);
  args.Set("max-queued-requests", 1);
  auto engine = testing::MakeEngine(args);
  Collector collector(2);
  PauseSync(*engine, PauseMode::kInPlace);  // nothing is admitted: both stay queued
  GenerateRequest low = testing::GreedyRequest("low", prompts[0], 4);
  low.priority = 1;
  ASSERT_TRUE(engine->Submit(std::move(low), collector.Sink(0)).ok());
  PauseSync(*engine, PauseMode::kInPlace);  // the inbox (and "low") was taken in
  GenerateRequest high = testing::GreedyRequest("high", prompts[1], 4);
  high.priority = 5;
  ASSERT_TRUE(engine->Submit(std::move(high), collector.Sink(1)).ok());
  PauseSync(*engine, PauseMode::kInPlace);
  collector.Wait(1);
  ASSERT_TRUE(collector[0].finish.has_value());
  EXPECT_EQ(collector[0].finish->kind, FinishKind::kAbort);
  EXPECT_EQ(collector[0].finish->status_code, 503);
  EXPECT_EQ(collector[0].finish->message, "The request is aborted by a higher priority request.");
  EXPECT_TRUE(collector[0].tokens.empty());
  engine->Continue();
  collector.Wait(2);
  EXPECT_EQ(collector[1].tokens, testing::ReferenceGreedy(prompts[1], 4));
  Status leaks = engine->CheckLeaks();
  EXPECT_TRUE(leaks.ok()) << leaks.message();
}

TEST(EngineLoopTest, PauseAbortEndsEveryRequestInFlight) {
  const auto prompts = SharedPrefixPrompts();
  auto engine = testing::MakeEngine(testing::BaseArgs());
  Collector collector(3);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(engine
                    ->Submit(testing::GreedyRequest("a" + std::to_string(i), prompts[i], 400),
                             collector.Sink(i))
                    .ok());
  }
  PauseSync(*engine, PauseMode::kAbort);
  collector.Wait(3);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(collector[i].finish->kind, FinishKind::kAbort);
  engine->Continue();
  Collector after(1);
  ASSERT_TRUE(engine->Submit(testing::GreedyRequest("b", prompts[0], 4), after.Sink(0)).ok());
  after.Wait(1);
  EXPECT_EQ(after[0].tokens, testing::ReferenceGreedy(prompts[0], 4));
}

// /release_memory_occupation of the KV pool: refused while a request runs; once idle it halts
// the engine (a request submitted meanwhile waits, no step runs) until the region is resumed,
// after which the waiting request gets its independent greedy reference output.
TEST(EngineLoopTest, ReleasedMemoryHaltsStepsUntilResumed) {
  const auto prompts = SharedPrefixPrompts();
  auto engine = testing::MakeEngine(testing::BaseArgs());
  auto sync = [&](auto call) {
    std::promise<Status> done;
    call([&done](Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  };
  const MemoryRegions kv{.kv_cache = true, .weights = false};
  // Busy: a request held in place by a pause is still running.
  Collector busy(1);
  ASSERT_TRUE(engine->Submit(testing::GreedyRequest("r", prompts[0], 300), busy.Sink(0)).ok());
  PauseSync(*engine, PauseMode::kInPlace);
  if (engine->Stats().num_running_reqs > 0) {
    EXPECT_FALSE(sync([&](auto cb) { engine->ReleaseMemoryAsync(kv, cb); }).ok());
  }
  engine->Continue();
  busy.Wait(1);
  EXPECT_FALSE(sync([&](auto cb) { engine->ResumeMemoryAsync(kv, nullptr, cb); }).ok());

  ASSERT_TRUE(sync([&](auto cb) { engine->ReleaseMemoryAsync(kv, cb); }).ok());
  EXPECT_TRUE(engine->Stats().released.kv_cache);
  EXPECT_EQ(engine->Stats().cached_tokens, 0);  // the prefix cache was flushed
  Collector waiting(1);
  ASSERT_TRUE(engine->Submit(testing::GreedyRequest("w", prompts[1], 6), waiting.Sink(0)).ok());
  // A command runs after the inbox (and so that submission) was taken in, with no step between;
  // with a request queued and no pause, a second release is refused.
  EXPECT_FALSE(sync([&](auto cb) { engine->ReleaseMemoryAsync(kv, cb); }).ok());
  EXPECT_TRUE(waiting[0].tokens.empty());
  EXPECT_GE(engine->Stats().num_queued_reqs, 1);
  ASSERT_TRUE(sync([&](auto cb) { engine->ResumeMemoryAsync(kv, nullptr, cb); }).ok());
  waiting.Wait(1);
  EXPECT_EQ(waiting[0].tokens, testing::ReferenceGreedy(prompts[1], 6));
  EXPECT_FALSE(engine->Stats().released.kv_cache);
  Status leaks = engine->CheckLeaks();
  EXPECT_TRUE(leaks.ok()) << leaks.message();
}

TEST(EngineLoopTest, ProfilerRecordsTheStepsThatRan) {
  const auto prompts = SharedPrefixPrompts();
  auto engine = testing::MakeEngine(testing::BaseArgs());
  std::mutex mu;
  std::vector<StepTrace> traces;
  auto sink = [&](StepTrace trace) {
    std::lock_guard lock(mu);
    traces.push_back(std::move(trace));
  };
  auto sync = [&](auto call) {
    std::promise<Status> done;
    call([&done](Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  };
  ASSERT_TRUE(sync([&](auto cb) { engine->StartProfileAsync({}, sink, cb); }).ok());
  EXPECT_FALSE(sync([&](auto cb) { engine->StartProfileAsync({}, sink, cb); }).ok());
  Collector collector(1);
  ASSERT_TRUE(engine->Submit(testing::GreedyRequest("x", prompts[0], 6), collector.Sink(0)).ok());
  collector.Wait(1);
  ASSERT_TRUE(sync([&](auto cb) { engine->StopProfileAsync(cb); }).ok());
  EXPECT_FALSE(sync([&](auto cb) { engine->StopProfileAsync(cb); }).ok());
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(traces.size(), 1u);
    const std::vector<StepRecord>& steps = traces[0].steps;
    ASSERT_EQ(steps.size(), 6u);  // one prefill, then one decode step per further token
    EXPECT_EQ(steps[0].stage, "prefill");
    EXPECT_EQ(steps[0].num_tokens, static_cast<int64_t>(prompts[0].size()));
    for (size_t i = 1; i < steps.size(); ++i) {
      EXPECT_EQ(steps[i].stage, "decode");
      EXPECT_EQ(steps[i].num_tokens, 1);
      EXPECT_EQ(steps[i].forward_ct, steps[i - 1].forward_ct + 1);
      EXPECT_GE(steps[i].start_us, steps[i - 1].start_us + steps[i - 1].duration_us);
    }
    traces.clear();
  }
  // num_steps ends the recording by itself; profile_stages keeps only decode steps.
  ProfileOptions options;
  options.num_steps = 3;
  options.stages = {"decode"};
  ASSERT_TRUE(sync([&](auto cb) { engine->StartProfileAsync(options, sink, cb); }).ok());
  Collector second(1);
  ASSERT_TRUE(engine->Submit(testing::GreedyRequest("y", prompts[1], 10), second.Sink(0)).ok());
  second.Wait(1);
  EXPECT_FALSE(sync([&](auto cb) { engine->StopProfileAsync(cb); }).ok());
  std::lock_guard lock(mu);
  ASSERT_EQ(traces.size(), 1u);
  ASSERT_EQ(traces[0].steps.size(), 3u);
  for (const StepRecord& step : traces[0].steps) EXPECT_EQ(step.stage, "decode");
}

// Prefill/decode disaggregation inside one process: one engine computes a prompt and exports
// its K/V rows; another, given the rows, matches all but the last prompt token and generates
// what computing the prompt itself gives (llama.cpp's greedy reference).
TEST(EngineLoopTest, PrefilledRowsFromAnotherEngineAreMatchedAndGiveTheSameOutput) {
  const std::vector<int32_t> prompt = SharedPrefixPrompts()[0];
  auto prefill = testing::MakeEngine(testing::BaseArgs());
  auto decode = testing::MakeEngine(testing::BaseArgs());
  GenerateRequest first = testing::GreedyRequest("p", prompt, 1);
  first.export_kv = true;
  Collector exported(1);
  ASSERT_TRUE(prefill->Submit(std::move(first), exported.Sink(0)).ok());
  exported.Wait(1);
  const std::shared_ptr<const kv::KvRows> rows = exported[0].events.back().kv_rows;
  ASSERT_NE(rows, nullptr);
  EXPECT_EQ(rows->tokens, prompt);
  EXPECT_EQ(rows->layout, decode->KvLayout());

  GenerateRequest second = testing::GreedyRequest("d", prompt, 12);
  second.prefilled_kv = rows;
  Collector decoded(1);
  ASSERT_TRUE(decode->Submit(std::move(second), decoded.Sink(0)).ok());
  decoded.Wait(1);
  EXPECT_EQ(decoded[0].cached_tokens, static_cast<int64_t>(prompt.size()) - 1);
  EXPECT_EQ(decoded[0].tokens, testing::ReferenceGreedy(prompt, 12));
  EXPECT_EQ(decoded[0].tokens[0], exported[0].tokens[0]);
  EXPECT_TRUE(prefill->CheckLeaks().ok());
  EXPECT_TRUE(decode->CheckLeaks().ok());

  // Rows of another layout end the request with a 500 naming both layouts.
  auto other = std::make_shared<kv::KvRows>(*rows);
  other->layout.row_bytes *= 2;
  other->bytes.resize(other->ExpectedBytes());
  GenerateRequest third = testing::GreedyRequest("x", prompt, 4);
  third.prefilled_kv = other;
  Collector refused(1);
  ASSERT_TRUE(decode->Submit(std::move(third), refused.Sink(0)).ok());
  refused.Wait(1);
  ASSERT_TRUE(refused[0].finish.has_value());
  EXPECT_EQ(refused[0].finish->kind, FinishKind::kAbort);
  EXPECT_EQ(refused[0].finish->status_code, 500);
  EXPECT_NE(refused[0].finish->message.find("layout"), std::string::npos);
  EXPECT_TRUE(refused[0].tokens.empty());
  EXPECT_TRUE(decode->CheckLeaks().ok());
}

}  // namespace
}  // namespace radixserve::engine

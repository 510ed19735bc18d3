// libFuzzer target: the JSON request bodies of the API routes, through the real handlers of
// api::ApiRoutes(). The first input byte picks the route and how the engine behaves; the rest is
// the request body. Bytes below 30 pick among the first six routes, as the seeds were written:
//   route = byte % 6:       0 /generate, 1 /v1/completions, 2 /v1/chat/completions, 3 /tokenize,
//                           4 /detokenize, 5 /abort_request
//   engine = byte / 6 % 5
// and bytes from 30 among the others (kRoutes[6..]): route = 6 + (byte - 30) % 22,
// engine = (byte - 30) / 22 % 5. Engine behaviours: 0 requests finish on a stop token, 1 on the
// length limit, 2 fail after admission (abort with status 400), 3 are refused at submission
// (kInvalidArgument), 4 the client disconnects before the engine answers.
// (tests/fuzz/corpus/README.md lists the byte of each seed.)
//
// The context is what main builds, without a model: ServerArgs from the command line
// `--model-path <stories260K/hf> --enable-metrics` resolved as main does, the stories260K
// tokenizer, the builtin llama-2 chat template over its tokenizer_config.json, the deepseek_coder
// completion template, ModelFacts from its config.json. A fake engine answers every request with
// up to two tokens (and logprobs when asked) once the handler has returned, as the engine thread
// would.
//
// Fails on: a crash or sanitizer report; a hang (-timeout); a 5xx status or a 5xx error inside a
// stream (the fake engine never causes one, so it means a handler bug: an exception reaching the
// dispatcher, an internal error); a call left without a complete response; an application/json
// body or stream event that is not JSON; rids still registered after the call ended.
//
// Set RADIX_FUZZ_5XX_DIR to keep going on a 5xx instead: the input is saved there, one file per
// distinct status and message. RADIX_FUZZ_VERBOSE=1 prints each input's response (to check seeds:
// `api_request_fuzz <files>` runs just those).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/response_store.h"
#include "api/routes.h"
#include "api/server_context.h"
#include "api/session_store.h"
#include "args/arg_parser.h"
#include "args/validate.h"
#include "chat/chat_template_loader.h"
#include "chat/completion_template.h"
#include "common/check.h"
#include "common/log.h"
#include "common/machine.h"
#include "engine/engine.h"
#include "metrics/serving_metrics.h"
#include "sampling/sampling_defaults.h"
#include "tokenizer/tokenizer_loader.h"

namespace {

using namespace radixserve;
using nlohmann::json;

struct RouteChoice {
  const char* method;
  const char* path;
};
constexpr RouteChoice kRoutes[] = {
    {"POST", "/generate"},
    {"POST", "/v1/completions"},
    {"POST", "/v1/chat/completions"},
    {"POST", "/tokenize"},
    {"POST", "/detokenize"},
    {"POST", "/abort_request"},
    // From byte 30 on.
    {"POST", "/generate_stream"},
    {"POST", "/"},
    {"POST", "/v1/responses"},
    {"POST", "/invocations"},
    {"POST", "/open_session"},
    {"POST", "/close_session"},
    {"POST", "/update_weight_version"},
    {"POST", "/pause_generation"},
    {"POST", "/continue_generation"},
    {"POST", "/configure_logging"},
    {"POST", "/set_internal_state"},
    {"POST", "/start_profile"},
    {"POST", "/stop_profile"},
    {"POST", "/update_weights_from_disk"},
    {"POST", "/get_weights_by_name"},
    {"POST", "/release_memory_occupation"},
    {"POST", "/resume_memory_occupation"},
    {"POST", "/flush_cache"},
    {"POST", "/v1/score"},
    {"POST", "/v1/rerank"},
    {"POST", "/parse_function_call"},
    {"POST", "/separate_reasoning"},
};
constexpr int kNumRoutes = static_cast<int>(std::size(kRoutes));
constexpr int kFirstRoutes = 6;  // the routes of bytes 0..29
constexpr int kFirstBytes = kFirstRoutes * 5;
static_assert(kNumRoutes - kFirstRoutes == 22, "the header comment and corpus/README.md say 22");
static_assert(kFirstBytes + (kNumRoutes - kFirstRoutes) * 5 <= 256, "one byte picks both");

enum class EngineMode { kStop, kLength, kFailAfterAdmission, kRefuse, kDisconnect };
constexpr int kNumModes = 5;

std::string_view g_input;  // the input being run, for the reports

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "api_request_fuzz: %s\n", what.c_str());
  std::abort();
}

void Report5xx(int status, std::string_view message) {
  const char* dir = std::getenv("RADIX_FUZZ_5XX_DIR");
  if (dir == nullptr || *dir == '\0') {
    Fail("a " + std::to_string(status) + " response: " + std::string(message.substr(0, 2000)));
  }
  std::string name = std::string(dir) + "/api-" + std::to_string(status) + "-" +
                     std::to_string(std::hash<std::string_view>{}(message));
  std::ofstream(name, std::ios::binary)
      .write(g_input.data(), static_cast<std::streamsize>(g_input.size()));
}

// Answers every request with up to two tokens when RunOne() runs it (after the handler has
// returned, as on the real engine thread). Abort() finishes matching queued requests with kAbort.
class FakeEngine final : public engine::Engine {
 public:
  EngineMode mode = EngineMode::kStop;
  const tokenizer::Tokenizer* tokenizer = nullptr;

  Status Submit(engine::GenerateRequest request, engine::EventSink sink) override {
    if (mode == EngineMode::kRefuse) {
      return Status(StatusCode::kInvalidArgument, "fuzz: the engine refuses this request");
    }
    queue_.push_back({std::move(request), std::move(sink), false});
    return Status::Ok();
  }

  void Abort(std::string_view rid, engine::AbortMatch match) override {
    for (Pending& p : queue_) {
      bool hit = match == engine::AbortMatch::kExactRid ? p.request.rid == rid
                                                        : p.request.rid.starts_with(rid);
      if (hit) p.aborted = true;
    }
  }

  void FlushCacheAsync(std::function<void(Status)> done) override { done(Status::Ok()); }
  void PauseAsync(engine::PauseMode, std::function<void()> done) override { done(); }
  void Continue() override {}
  engine::EngineStats Stats() const override { return {}; }
  Status CheckLeaks() const override { return Status::Ok(); }
  void Shutdown() override {}

  // Runs the next queued request to its end; false when none is queued.
  bool RunOne() {
    if (queue_.empty()) return false;
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    Run(p);
    return true;
  }

 private:
  struct Pending {
    engine::GenerateRequest request;
    engine::EventSink sink;
    bool aborted;
  };

  engine::TokenLogprobInfo Logprob(const engine::GenerateRequest& req, int32_t token, float lp) {
    engine::TokenLogprobInfo info;
    info.token_id = token;
    info.logprob = lp;
    for (int32_t j = 0; j < std::min<int32_t>(req.top_logprobs_num, 3); ++j) {
      info.top.emplace_back(token + j + 1, lp - 1.0f - static_cast<float>(j));
    }
    info.token_ids_logprobs.assign(req.token_ids_logprob.size(), -2.5f);
    return info;
  }

  void Run(Pending& p) {
    const engine::GenerateRequest& req = p.request;
    const auto prompt = static_cast<int64_t>(req.input_ids.size());
    engine::RequestEvent first;
    first.prompt_tokens = prompt;
    if (req.return_logprob && req.logprob_start_len >= 0 && req.logprob_start_len < prompt) {
      for (int64_t i = req.logprob_start_len; i < prompt; ++i) {
        first.input_logprobs.push_back(
            Logprob(req, req.input_ids[static_cast<size_t>(i)],
                    i == req.logprob_start_len ? std::nanf("") : -1.25f));
      }
    }
    if (p.aborted) return Finish(p, std::move(first), engine::FinishKind::kAbort, "Aborted", 0);
    if (mode == EngineMode::kFailAfterAdmission) {
      return Finish(p, std::move(first), engine::FinishKind::kAbort,
                    "fuzz: the request failed after admission", 400);
    }
    const int64_t max_new =
        std::clamp<int64_t>(req.sampling.max_new_tokens.value_or(2), int64_t{0}, int64_t{2});
    int64_t generated = 0;
    for (int64_t k = 0; k < max_new; ++k) {
      engine::RequestEvent event = k == 0 ? std::move(first) : engine::RequestEvent();
      const int32_t token = static_cast<int32_t>(100 + 37 * k);
      event.new_token_ids = {token};
      if (req.detokenize && tokenizer != nullptr) {
        event.text_delta = tokenizer->Decode(std::vector<tokenizer::TokenId>{token});
      }
      if (req.return_logprob) event.output_logprobs.push_back(Logprob(req, token, -0.5f));
      event.prompt_tokens = prompt;
      event.completion_tokens = ++generated;
      event.e2e_latency_s = 0.01;
      p.sink(std::move(event));
      first = engine::RequestEvent();
      first.prompt_tokens = prompt;
      first.completion_tokens = generated;
    }
    engine::RequestEvent last = std::move(first);
    last.finished = true;
    engine::FinishReason reason;
    if (mode == EngineMode::kLength || max_new == 0) {
      reason.kind = engine::FinishKind::kLength;
    } else {
      reason.kind = engine::FinishKind::kStop;
      reason.matched_token = 2;
    }
    last.finish_reason = reason;
    last.e2e_latency_s = 0.02;
    p.sink(std::move(last));
  }

  void Finish(Pending& p, engine::RequestEvent event, engine::FinishKind kind, std::string message,
              int status) {
    event.finished = true;
    engine::FinishReason reason;
    reason.kind = kind;
    reason.message = std::move(message);
    reason.status_code = status;
    event.finish_reason = reason;
    p.sink(std::move(event));
  }

  std::deque<Pending> queue_;
};

// Records the response; calls after it completed (or after a disconnect) are ignored, as the
// interface promises.
class RecordingWriter final : public api::ResponseWriter {
 public:
  int status = 0;
  bool streaming = false;
  bool complete = false;
  bool disconnected = false;
  std::string transcript;  // the body, or the stream's events

  void Send(int code, std::string content_type, std::string body) override {
    if (started() || disconnected) return;
    status = code;
    complete = true;
    transcript = body;
    if (code >= 500) Report5xx(code, body);
    if (content_type == "application/json") CheckJson(body, "body");
  }
  void StartStream() override {
    if (started() || disconnected) return;
    streaming = true;
    status = 200;
  }
  void SendEvent(std::string data) override {
    if (!streaming || complete || disconnected) return;
    transcript += "data: " + data + "\n";
    if (data == "[DONE]" || data == "[done]") return;  // SGLang/OpenAI's end, RTP-LLM's
    json event = CheckJson(data, "stream event");
    if (event.is_object() && event.contains("error") && event["error"].is_object()) {
      const json& code = event["error"].value("code", json());
      if (code.is_number_integer() && code.get<int64_t>() >= 500) {
        Report5xx(static_cast<int>(code.get<int64_t>()), data);
      }
      const json& message = event["error"].value("message", json());
      if (message.is_string() && message.get<std::string>().starts_with("Internal server error")) {
        Report5xx(500, data);
      }
    }
  }
  void EndStream() override {
    if (!streaming || complete) return;
    complete = true;
  }
  // The HTTP transport runs posted tasks later, on its I/O thread: queued, run by RunPosted().
  void Post(std::function<void()> task) override { posted_.push_back(std::move(task)); }
  bool RunPosted() {
    if (posted_.empty()) return false;
    while (!posted_.empty()) {
      auto task = std::move(posted_.front());
      posted_.pop_front();
      task();
    }
    return true;
  }

  void OnDisconnect(std::function<void()> callback) override {
    if (disconnected) {
      callback();
    } else {
      on_disconnect_.push_back(std::move(callback));
    }
  }

  void Disconnect() {
    if (complete || disconnected) return;
    disconnected = true;
    auto callbacks = std::move(on_disconnect_);
    for (auto& callback : callbacks) callback();
  }

 private:
  bool started() const { return streaming || complete; }

  static json CheckJson(const std::string& text, const char* what) {
    json value = json::parse(text, nullptr, false);
    if (value.is_discarded()) Fail(std::string("the ") + what + " is not JSON: " + text);
    return value;
  }

  std::vector<std::function<void()>> on_disconnect_;
  std::deque<std::function<void()>> posted_;
};

std::string SharedDir() {
  const char* env = std::getenv("RADIX_SHARED_DIR");
  return env != nullptr && *env != '\0' ? env : RADIX_SHARED_DIR;
}

template <typename T>
T Must(Expected<T> value, const std::string& what) {
  if (!value.ok()) Fail(what + ": " + value.status().message());
  return std::move(value).value();
}

struct Fixture {
  args::ServerArgs args;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<chat::ChatTemplate> chat_template;
  chat::CompletionTemplate completion_template;
  std::unique_ptr<metrics::ServingMetrics> metrics;
  api::SessionStore sessions;
  api::ResponseStore responses{/*max_entries=*/64, /*max_bytes=*/std::size_t{1} << 20};
  FakeEngine engine;
  api::ServerContext ctx;
  api::ApiHandler handlers[kNumRoutes];
};

Fixture* g_fixture = nullptr;

void Init() {
  const std::string hf = SharedDir() + "/models/stories260K/hf";
  if (!std::filesystem::exists(hf + "/tokenizer.json")) {
    Fail("the stories260K model is missing (" + hf + "); set RADIX_SHARED_DIR");
  }
  auto* f = new Fixture();
  auto parsed =
      Must(args::ParseCommandLine(std::vector<std::string>{"--model-path", hf, "--enable-metrics"}),
           "the command line");
  f->args = std::move(parsed.args);
  std::vector<std::string> warnings;
  MachineInfo machine{.total_memory_bytes = uint64_t{8} << 30,
                      .available_memory_bytes = uint64_t{8} << 30,
                      .usable_cpus = 2};
  if (Status resolved = args::ResolveServerArgs(f->args, machine, warnings); !resolved.ok()) {
    Fail("ResolveServerArgs: " + resolved.message());
  }

  f->tokenizer = Must(tokenizer::LoadTokenizer(hf), "the tokenizer");
  f->chat_template = std::make_unique<chat::ChatTemplate>(
      Must(chat::LoadChatTemplate("llama-2", hf + "/tokenizer_config.json"), "the chat template"));
  f->completion_template =
      Must(chat::CompletionTemplate::Load("deepseek_coder"), "the completion template");
  metrics::ServingMetricsOptions metrics_options;
  metrics_options.model_name = f->args.GetString("served-model-name");
  f->metrics = Must(metrics::ServingMetrics::Create(metrics_options), "the metrics");

  std::ifstream config_file(hf + "/config.json");
  std::stringstream config_text;
  config_text << config_file.rdbuf();
  json config = json::parse(config_text.str());

  f->engine.tokenizer = f->tokenizer.get();
  api::ServerContext& ctx = f->ctx;
  ctx.args = &f->args;
  ctx.engine = &f->engine;
  ctx.tokenizer = f->tokenizer.get();
  ctx.chat_template = f->chat_template.get();
  ctx.completion_template = &f->completion_template;
  ctx.metrics = f->metrics.get();
  ctx.sessions = &f->sessions;
  ctx.response_store = &f->responses;
  ctx.model.model_type = config.at("model_type").get<std::string>();
  ctx.model.architectures = config.at("architectures").get<std::vector<std::string>>();
  ctx.model.context_len = config.at("max_position_embeddings").get<int64_t>();
  ctx.model.vocab_size = config.at("vocab_size").get<int64_t>();
  // As if generation_config.json held sampling values (stories260K's has none).
  ctx.model.generation_defaults = Must(
      sampling::ModelSamplingDefaults(json{{"temperature", 0.7}, {"top_p", 0.9}, {"top_k", 40}},
                                      sampling::SamplingDefaultsSource::kModel),
      "the sampling defaults");
  ctx.served_model_name = f->args.GetString("served-model-name");
  ctx.weight_version.Set(f->args.GetString("weight-version"));
  ctx.starting = false;

  std::vector<api::ApiRoute> routes = api::ApiRoutes();
  for (int i = 0; i < kNumRoutes; ++i) {
    for (const api::ApiRoute& route : routes) {
      if (route.path == kRoutes[i].path && !route.prefix) f->handlers[i] = route.handler;
    }
    if (!f->handlers[i]) Fail(std::string("no route ") + kRoutes[i].path);
  }
  g_fixture = f;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  InitLogging("critical");  // handlers log per request
  Init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  g_input = std::string_view(reinterpret_cast<const char*>(data), size);
  Fixture& f = *g_fixture;
  const int byte = data[0];
  const int later = kNumRoutes - kFirstRoutes;
  const int route =
      byte < kFirstBytes ? byte % kFirstRoutes : kFirstRoutes + (byte - kFirstBytes) % later;
  const auto mode = static_cast<EngineMode>(
      (byte < kFirstBytes ? byte / kFirstRoutes : (byte - kFirstBytes) / later) % kNumModes);
  f.engine.mode = mode;

  api::ApiRequest request{.method = kRoutes[route].method,
                          .path = kRoutes[route].path,
                          .path_param = "",
                          .content_type = "application/json",
                          .body = std::string(reinterpret_cast<const char*>(data) + 1, size - 1)};
  auto writer = std::make_shared<RecordingWriter>();
  // A baseline, not zero: with RADIX_FUZZ_5XX_DIR, an earlier input's bug may have leaked some.
  const size_t live_rids = f.ctx.rids.size();
  bool threw = false;
  try {
    f.handlers[route](f.ctx, request, writer);
  } catch (const std::exception& e) {
    // The dispatcher turns an escaping exception into a 500.
    Report5xx(500, std::string("the handler threw: ") + e.what());
    threw = true;
  }
  if (mode == EngineMode::kDisconnect) writer->Disconnect();
  // The engine thread and the I/O thread take turns until both are idle.
  while (writer->RunPosted() || f.engine.RunOne()) {
  }

  if (std::getenv("RADIX_FUZZ_VERBOSE") != nullptr) {  // for writing seeds: what the input did
    std::fprintf(stderr, "%s engine=%d -> %d%s\n%s\n", kRoutes[route].path, static_cast<int>(mode),
                 writer->status, writer->streaming ? " (stream)" : "",
                 writer->transcript.substr(0, 2000).c_str());
  }
  if (threw) return 0;
  if (!writer->disconnected && !writer->complete) {
    // The HTTP layer would answer 500 (no response) or cut the stream short.
    Report5xx(500, writer->streaming ? "the stream never ended" : "the handler sent no response");
  }
  if (f.ctx.rids.size() != live_rids) {
    Fail(std::to_string(f.ctx.rids.size() - live_rids) +
         " rids still registered after the call ended");
  }
  return 0;
}

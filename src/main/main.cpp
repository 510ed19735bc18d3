// radixserve entry point: parse and resolve the server arguments, load the model, start the
// engine and the HTTP server, serve until SIGINT/SIGTERM.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "api/admin_api.h"
#include "api/background_streams.h"
#include "api/concurrency_limit.h"
#include "api/crash_dump.h"
#include "api/health_probe.h"
#include "api/request_log.h"
#include "api/response_store.h"
#include "api/server_context.h"
#include "api/session_store.h"
#include "args/arg_parser.h"
#include "args/help_text.h"
#include "args/validate.h"
#include "chat/completion_template.h"
#include "chat/reasoning_parser.h"
#include "chat/tool_call_parser.h"
#include "common/log.h"
#include "common/machine.h"
#include "common/thread_pool.h"
#include "common/version.h"
#include "common/work_queue.h"
#include "disagg/kv_transfer.h"
#include "dist/tp_model.h"
#include "engine/embedding_engine.h"
#include "engine/engine_factory.h"
#include "http/http_server.h"
#include "kernels/kernel_choice.h"
#include "kv/memory_sizing.h"
#include "main/api_bridge.h"
#include "main/grammar_setup.h"
#include "main/lora_setup.h"
#include "main/model_assets.h"
#include "main/tensor_parallel.h"
#include "main/warmup.h"
#include "main/weight_update.h"
#include "metrics/push_gateway.h"
#include "metrics/serving_metrics.h"
#include "web/web_routes.h"

namespace {

namespace key = radixserve::args::key;

constexpr int kUsageError = 2;
constexpr int kStartupError = 1;
// /health_generate answers 503 when the engine produces nothing within this.
constexpr auto kHealthGenerateTimeout = std::chrono::milliseconds(20'000);
// Threads that compile grammars missing from the cache (each compilation is single-threaded).
constexpr int kGrammarCompileThreads = 2;
// After the engine has ended every request, connections get this long to take their last bytes.
constexpr auto kResponseFlushGrace = std::chrono::milliseconds(5'000);

// SIGINT/SIGTERM as seen by main: the first one starts the graceful shutdown, a second one cuts
// the grace period short.
class ShutdownSignal {
 public:
  void Notify(int signal_number) {
    {
      std::lock_guard lock(mu_);
      if (first_ == 0) {
        first_ = signal_number;
      } else {
        repeated_ = true;
      }
    }
    cv_.notify_all();
  }
  // Blocks until the first signal; returns its number.
  int Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return first_ != 0; });
    return first_;
  }
  // Waits up to `timeout` for a second signal; true once one came.
  bool WaitRepeat(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return repeated_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int first_ = 0;
  bool repeated_ = false;
};

// The engine of an embedding server: one EmbeddingEngine on the shared compute pool.
radixserve::Expected<std::unique_ptr<radixserve::engine::Engine>> MakeEmbeddingEngine(
    const radixserve::args::ServerArgs& args,
    std::shared_ptr<const radixserve::model::EncoderModel> encoder, radixserve::ThreadPool* pool) {
  if (args.GetInt(key::kDpSize) > 1) {
    return radixserve::InvalidArgument(
        "argument --dp-size: data parallelism is not supported for embedding models yet");
  }
  radixserve::engine::EmbeddingEngineConfig config;
  config.max_batch_tokens = args.GetInt(key::kMaxPrefillTokens);
  if (auto n = args.GetOptionalInt(key::kMaxRunningRequests)) config.max_batch_requests = *n;
  config.max_queued_requests = args.GetInt(key::kMaxQueuedRequests);
  return std::unique_ptr<radixserve::engine::Engine>(
      new radixserve::engine::EmbeddingEngine(std::move(encoder), pool, config));
}

int64_t InFlight(const radixserve::engine::Engine& engine) {
  const radixserve::engine::EngineStats stats = engine.Stats();
  return stats.num_running_reqs + stats.num_queued_reqs;
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "usage: radixserve --model-path MODEL_PATH [options]  (see --help)\n");
  std::fprintf(stderr, "radixserve: error: %s\n", message.c_str());
  return kUsageError;
}

int StartupError(const std::string& message) {
  RADIX_LOG_ERROR("{}", message);
  return kStartupError;
}

std::optional<std::vector<double>> OptionalBuckets(const radixserve::args::ServerArgs& args,
                                                   radixserve::args::ArgKey name) {
  const nlohmann::json& value = args.Get(name);
  if (value.is_null()) return std::nullopt;
  return value.get<std::vector<double>>();
}

std::vector<std::string> Words(const radixserve::args::ServerArgs& args,
                               radixserve::args::ArgKey name) {
  const nlohmann::json& value = args.Get(name);
  std::vector<std::string> out;
  if (!value.is_array()) return out;
  for (const auto& item : value)
    out.push_back(item.is_string() ? item.get<std::string>() : item.dump());
  return out;
}

radixserve::Expected<std::unique_ptr<radixserve::metrics::ServingMetrics>> MakeMetrics(
    const radixserve::args::ServerArgs& args, const std::string& model_name) {
  radixserve::metrics::ServingMetricsOptions options;
  options.model_name = model_name;
  options.bucket_time_to_first_token = OptionalBuckets(args, key::kBucketTimeToFirstToken);
  options.bucket_inter_token_latency = OptionalBuckets(args, key::kBucketInterTokenLatency);
  options.bucket_e2e_request_latency = OptionalBuckets(args, key::kBucketE2eRequestLatency);
  options.collect_tokens_histogram = args.GetBool(key::kCollectTokensHistogram);
  options.prompt_tokens_buckets = Words(args, key::kPromptTokensBuckets);
  options.generation_tokens_buckets = Words(args, key::kGenerationTokensBuckets);
  options.allowed_customer_labels = Words(args, key::kTokenizerMetricsAllowedCustomerLabels);
  if (!args.IsNull(key::kHicacheStorageBackend)) {
    options.storage_backend = args.GetString(key::kHicacheStorageBackend);
  }
  return radixserve::metrics::ServingMetrics::Create(options);
}

// LightLLM's metrics push: where (--metric_gateway, --job_name, --grouping_key), how often
// (--push_interval) and as whom (--enable_monitor_auth: HTTP Basic auth from the USERNAME and
// PASSWORD environment variables, as LightLLM reads them). nullopt without a gateway.
struct MetricsPush {
  radixserve::metrics::PushGatewayOptions options;
  std::string url;
};

radixserve::Expected<std::optional<MetricsPush>> MetricsPushFromArgs(
    const radixserve::args::ServerArgs& args) {
  using radixserve::InvalidArgument;
  std::optional<std::string> gateway = args.GetOptionalString(key::kMetricGateway);
  if (!gateway) return std::optional<MetricsPush>();
  if (gateway->empty())
    return InvalidArgument("argument --metric_gateway: the gateway address is empty");
  MetricsPush push;
  push.options.gateway = *gateway;
  push.options.job = args.GetString(key::kJobName);
  push.options.grouping_key = Words(args, key::kGroupingKey);
  const int64_t interval = args.GetInt(key::kPushInterval);
  if (interval < 1) {
    return InvalidArgument("argument --push_interval: must be at least 1 second (got " +
                           std::to_string(interval) + ")");
  }
  push.options.interval = std::chrono::seconds(interval);
  if (args.GetBool(key::kEnableMonitorAuth)) {
    const char* user = std::getenv("USERNAME");
    const char* password = std::getenv("PASSWORD");
    if (user == nullptr || password == nullptr) {
      return InvalidArgument(
          "argument --enable_monitor_auth: set the USERNAME and PASSWORD environment variables "
          "(HTTP Basic auth to the push gateway)");
    }
    push.options.basic_auth = std::make_pair(std::string(user), std::string(password));
  }
  auto url = radixserve::metrics::PushUrl(push.options);
  if (!url.ok()) return InvalidArgument("argument --grouping_key: " + url.status().message());
  push.url = std::move(url).value();
  return std::optional<MetricsPush>(std::move(push));
}

}  // namespace

int main(int argc, char** argv) {
  using radixserve::args::ParsedCommandLine;
  namespace rs = radixserve;
  const auto process_start = std::chrono::steady_clock::now();
  auto parsed = rs::args::ParseCommandLine(argc, argv);
  if (!parsed.ok()) return UsageError(parsed.status().message());
  if (parsed->action == ParsedCommandLine::Action::kHelp) {
    std::cout << rs::args::RenderHelp();
    return 0;
  }
  if (parsed->action == ParsedCommandLine::Action::kVersion) {
    std::cout << "radixserve " << rs::kVersion << "\n";
    return 0;
  }

  // A peer that is gone (a tensor-parallel or pipeline rank, a KV transfer's, an HTTP client) is
  // an error on the write that finds it, not a signal that kills the process: gloo's TCP pairs
  // write with writev, which raises SIGPIPE on a closed socket (the leader of a pipeline whose
  // last stage was killed died of it in one CI run instead of logging the failed send and exiting
  // 1). The ranks started below inherit it.
  std::signal(SIGPIPE, SIG_IGN);
  rs::args::ServerArgs& args = parsed->args;
  if (!rs::InitLogging(args.GetString(key::kLogLevel))) {
    return UsageError("argument --log-level: invalid choice: '" + args.GetString(key::kLogLevel) +
                      "' (choose from 'debug', 'info', 'warning', 'error', 'critical')");
  }
  std::vector<std::string> warnings = std::move(parsed->notices);
  // The KV pool's memory rule reads the host memory as it was before the weights load.
  (void)rs::kv::StartupHostMemory();
  rs::Status resolved = rs::args::ResolveServerArgs(args, rs::ProbeMachine(), warnings);
  if (!resolved.ok()) return UsageError(resolved.message());
  for (const std::string& warning : warnings) RADIX_LOG_WARN("{}", warning);

  if (args.GetBool(key::kPrintConfig)) {
    std::cout << args.PublicValues().dump(2) << "\n";
    return 0;
  }
  RADIX_LOG_INFO("server_args={}", args.PublicValues().dump());

  // Parser names are checked before the model loads (exit status 2 naming the argument).
  if (auto name = args.GetOptionalString(key::kToolCallParser)) {
    if (auto parser = rs::chat::ToolCallParser::Create(*name, {}); !parser.ok()) {
      return UsageError("argument --tool-call-parser: " + parser.status().message());
    }
  }
  if (auto name = args.GetOptionalString(key::kReasoningParser)) {
    if (auto parser = rs::chat::ReasoningParser::Create(*name); !parser.ok()) {
      return UsageError("argument --reasoning-parser: " + parser.status().message());
    }
  }

  auto metrics_push = MetricsPushFromArgs(args);
  if (!metrics_push.ok()) return UsageError(metrics_push.status().message());

  // The kernels this machine runs (the first start on a machine measures the BF16 products and
  // the quantized tiles for a few milliseconds), chosen before any weight is packed; a bad
  // RADIX_BF16_PRODUCT or RADIX_QUANT_TILES is a usage error.
  if (std::string bad = rs::kernels::ValidateKernelChoiceEnvironment(); !bad.empty()) {
    return UsageError(bad);
  }
  RADIX_LOG_INFO("{}", rs::kernels::DescribeKernelChoice(rs::kernels::ActiveKernelChoice()));

  // --tp-size or --pp-size > 1: this node's other ranks start here; followers never serve HTTP.
  auto tp = rs::SetUpTensorParallel(args, argv);
  if (!tp.ok()) {
    if (tp.status().message().rfind("argument --", 0) == 0)
      return UsageError(tp.status().message());
    return StartupError(tp.status().message());
  }
  if (!tp->leader()) return rs::RunFollowerRank(args, *tp);

  const auto load_start = std::chrono::steady_clock::now();
  auto assets = rs::LoadModelAssets(args, tp->shard(), tp->stage());
  const auto load_end = std::chrono::steady_clock::now();
  if (!assets.ok()) {
    if (assets.status().message().rfind("argument --", 0) == 0) {
      return UsageError(assets.status().message());
    }
    return StartupError(assets.status().message());
  }
  if (tp->group != nullptr) {
    if (rs::Status ready = rs::WaitForFollowers(*tp); !ready.ok()) {
      return StartupError(ready.message());
    }
    assets->model =
        std::make_shared<rs::dist::TensorParallelLeader>(assets->model, tp->group.get());
  }

  // Before the engine: requests in the engine hold grammars compiled for this vocabulary.
  auto grammar = rs::CreateGrammarSetup(args, *assets);
  if (!grammar.ok()) return StartupError(grammar.status().message());

  // LoRA adapters of --lora-paths load before the engine starts (a bad one is a usage error).
  auto lora_registry = rs::CreateLoraRegistry(args, assets->model);
  if (!lora_registry.ok()) return UsageError(lora_registry.status().message());

  rs::ThreadPool pool(tp->threads);
  const auto engine_start = std::chrono::steady_clock::now();
  auto engine = assets->encoder != nullptr
                    ? MakeEmbeddingEngine(args, assets->encoder, &pool)
                    : rs::engine::CreateEngine(args, assets->model, assets->tokenizer, &pool,
                                               assets->draft_model);
  if (!engine.ok()) {
    // Arguments that only prove impossible against the model and the machine are still usage
    // errors (exit status 2, the message names the argument).
    if (engine.status().code() == rs::StatusCode::kInvalidArgument) {
      return UsageError(engine.status().message());
    }
    return StartupError(engine.status().message());
  }

  const auto engine_end = std::chrono::steady_clock::now();

  rs::api::ServerContext ctx;
  ctx.args = &args;
  ctx.launch_command = rs::args::ServerArgs::PublicCommandLine(argc, argv);
  ctx.engine = engine->get();
  ctx.tokenizer = assets->tokenizer.get();
  ctx.chat_template = assets->chat_template.get();
  ctx.model = assets->facts;
  ctx.grammar_cache = grammar->cache.get();
  ctx.grammar_disabled_reason = grammar->disabled_reason;
  // Constraints missing from the cache compile here, off the I/O and engine threads. Declared
  // after ctx and the engine, so it finishes its queued compilations before they go away.
  std::optional<rs::WorkQueue> grammar_queue;
  if (ctx.grammar_cache != nullptr) {
    grammar_queue.emplace(kGrammarCompileThreads, "radix-grammar");
    ctx.grammar_queue = &*grammar_queue;
  }
  ctx.lora_registry = lora_registry->get();
  // Prefill/decode disaggregation: the transfer service (declared after the engine, so that it
  // stops, and with it every callback that submits, before the engine goes).
  std::unique_ptr<rs::disagg::KvTransfer> kv_transfer;
  if (const std::string mode = args.GetString(key::kDisaggregationMode); mode != "null") {
    if (assets->encoder != nullptr) {
      return UsageError("argument --disaggregation-mode: an embedding model has no decode phase");
    }
    rs::disagg::KvTransferOptions options;
    options.role = mode == "prefill" ? rs::disagg::Role::kPrefill : rs::disagg::Role::kDecode;
    options.listen_host = args.GetString(key::kHost);
    options.bootstrap_port = static_cast<int>(args.GetInt(key::kDisaggregationBootstrapPort));
    // A decode server takes rows of its own layout and context only.
    options.layout = ctx.engine->KvLayout();
    options.max_tokens =
        static_cast<uint64_t>(std::max<int64_t>(ctx.engine->Stats().context_len, 1));
    // SGLang's environment variable for how long either side waits for the other.
    if (const char* wait = std::getenv("SGLANG_DISAGGREGATION_WAITING_TIMEOUT")) {
      options.timeout_s = std::max(0.1, std::atof(wait));
    }
    auto made = rs::disagg::KvTransfer::Create(options);
    if (!made.ok()) return StartupError(made.status().message());
    kv_transfer = std::move(made).value();
    ctx.kv_transfer = kv_transfer.get();
    if (mode == "prefill") {
      RADIX_LOG_INFO("Disaggregation mode prefill: K/V transfers served on {}:{}.",
                     options.listen_host, kv_transfer->bootstrap_port());
    } else {
      RADIX_LOG_INFO("Disaggregation mode decode: prompt K/V fetched from the prefill servers.");
    }
  }
  // /update_weights_from_disk reloads through main's load options; it owns the served model from
  // here on (the engine holds its own reference).
  std::optional<rs::ServerWeightLoader> weight_loader;
  if (assets->model != nullptr) {
    weight_loader.emplace(args, std::move(assets->model), ctx.lora_registry);
    ctx.weight_loader = &*weight_loader;
  }
  // /load_lora_adapter reads adapter files here, off the I/O threads.
  rs::WorkQueue admin_queue(1, "radix-admin");
  ctx.admin_queue = &admin_queue;
  std::optional<rs::WorkQueue> lora_queue;
  if (ctx.lora_registry != nullptr) {
    lora_queue.emplace(1, "radix-lora");
    ctx.lora_queue = &*lora_queue;
  }
  ctx.served_model_name = args.GetString(key::kServedModelName);
  ctx.weight_version.Set(args.GetString(key::kWeightVersion));
  ctx.limits = {.max_n = args.GetInt(key::kMaxN),
                .max_requests_per_call = args.GetInt(key::kMaxRequestsPerCall),
                .max_top_logprobs = args.GetInt(key::kMaxTopLogprobs)};
  // RTP-LLM's --concurrency-limit, enforced when it or --concurrency-with-block is given: its
  // default (32) must not limit the users of the other servers' launch lines.
  std::optional<rs::api::ConcurrencyLimit> concurrency;
  if (args.IsExplicit(key::kConcurrencyLimit) || args.IsExplicit(key::kConcurrencyWithBlock)) {
    concurrency.emplace(args.GetInt(key::kConcurrencyLimit),
                        args.GetBool(key::kConcurrencyWithBlock));
    ctx.concurrency = &*concurrency;
    RADIX_LOG_INFO("Concurrency limit: {} calls in flight; beyond it calls {}.",
                   concurrency->limit(), concurrency->blocks() ? "wait" : "are refused");
  }
  rs::api::HealthProbe health_probe(engine->get(), kHealthGenerateTimeout);
  ctx.health_probe = &health_probe;
  // /v1/responses keeps its answers (store: true) for previous_response_id and GET; the oldest go
  // first past these bounds.
  rs::api::ResponseStore response_store(/*max_entries=*/4096, /*max_bytes=*/std::size_t{256} << 20);
  ctx.response_store = &response_store;
  // Background Responses: their event logs (stream: true, resumable) and the thread that formats
  // their events.
  rs::api::BackgroundStreams background_streams(/*max_streams=*/1024,
                                                /*max_bytes=*/std::size_t{256} << 20);
  ctx.background_streams = &background_streams;
  rs::WorkQueue background_queue(1, "radix-backgrnd");
  ctx.background_queue = &background_queue;
  rs::api::SessionStore sessions;
  ctx.sessions = &sessions;
  std::optional<rs::chat::CompletionTemplate> completion_template;
  if (auto name = args.GetOptionalString(key::kCompletionTemplate)) {
    auto loaded = rs::chat::CompletionTemplate::Load(*name);
    if (!loaded.ok()) {
      return UsageError("argument --completion-template: " + loaded.status().message());
    }
    completion_template = std::move(loaded).value();
    ctx.completion_template = &*completion_template;
  }
  std::unique_ptr<rs::metrics::ServingMetrics> metrics;
  if (!Words(args, key::kTokenizerMetricsAllowedCustomerLabels).empty() &&
      args.GetString(key::kTokenizerMetricsCustomLabelsHeader).empty()) {
    return UsageError(
        "argument --tokenizer-metrics-allowed-customer-labels: needs "
        "--tokenizer-metrics-custom-labels-header (the header carrying the labels)");
  }
  // LightLLM always collects its metrics; pushing them needs them collected (and /metrics then
  // serves them too).
  if (args.GetBool(key::kEnableMetrics) || metrics_push->has_value()) {
    auto made = MakeMetrics(args, ctx.served_model_name);
    if (!made.ok()) return UsageError(made.status().message());
    metrics = std::move(made).value();
    ctx.metrics = metrics.get();
    if (!Words(args, key::kTokenizerMetricsAllowedCustomerLabels).empty()) {
      ctx.metrics_labels_header = args.GetString(key::kTokenizerMetricsCustomLabelsHeader);
    }
  }

  // RTP-LLM's --py-inference-log-response: the request log, at a level that shows the output
  // (2, SGLang's default, unless --log-requests-level asks for more).
  const bool log_responses = args.GetBool(key::kPyInferenceLogResponse);
  if (args.GetBool(key::kLogRequests) || log_responses) {
    int level = static_cast<int>(args.GetInt(key::kLogRequestsLevel));
    if (log_responses) level = std::max(level, 2);
    ctx.request_log = std::make_shared<const rs::api::RequestLog>(level);
  }
  std::unique_ptr<rs::api::CrashDump> crash_dump;
  if (auto folder = args.GetOptionalString(key::kCrashDumpFolder)) {
    crash_dump = std::make_unique<rs::api::CrashDump>(*folder, args.PublicValues());
    crash_dump->InstallSignalHandlers();
    ctx.crash_dump = crash_dump.get();
  }

  rs::http::ServerOptions http_options;
  http_options.host = args.GetString(key::kHost);
  http_options.port = static_cast<uint16_t>(args.GetInt(key::kPort));
  http_options.api_key = args.GetOptionalString(key::kApiKey).value_or("");
  http_options.admin_api_key = args.GetOptionalString(key::kAdminApiKey).value_or("");
  http_options.allowed_origins = Words(args, key::kAllowedOrigins);
  http_options.allowed_hosts = Words(args, key::kAllowedHosts);
  http_options.max_body_bytes = static_cast<std::size_t>(args.GetInt(key::kMaxRequestBodyMb)) << 20;
  http_options.max_buffered_body_bytes =
      static_cast<std::size_t>(args.GetInt(key::kMaxBufferedBodyMb)) << 20;
  // After the engine's drain, responses only need to reach the clients.
  http_options.shutdown_grace = kResponseFlushGrace;
  if (metrics) {
    http_options.on_response = [m = metrics.get()](const rs::http::ResponseInfo& response) {
      m->CountHttpResponse(std::string(response.endpoint), response.status,
                           std::string(response.method));
    };
  }
  http_options.log_level_http =
      args.GetOptionalString(key::kLogLevelHttp).value_or(args.GetString(key::kLogLevel));
  rs::http::Router router = rs::BuildRouter(ctx);
  rs::web::AddWebRoutes(router);  // the chat page at /
  rs::http::HttpServer server(http_options, std::move(router));
  if (rs::Status started = server.Start(); !started.ok()) {
    (*engine)->Shutdown();
    return StartupError(started.message());
  }
  ShutdownSignal shutdown_signal;
  server.HandleSignals(
      [&shutdown_signal](int signal_number) { shutdown_signal.Notify(signal_number); });

  if (!args.GetBool(key::kSkipServerWarmup)) {
    if (rs::Status warmed = rs::RunWarmup(ctx); !warmed.ok()) {
      RADIX_LOG_ERROR("warmup failed: {}", warmed.message());
    }
  }
  // SGLang's startup_time phases, in seconds (no CUDA graphs: their phases stay 0).
  const auto seconds = [](auto from, auto to) {
    return std::chrono::duration<double>(to - from).count();
  };
  ctx.startup_time = {{"load_weight", seconds(load_start, load_end)},
                      {"kv_cache_allocation", seconds(engine_start, engine_end)},
                      {"scheduler_e2e", seconds(process_start, engine_end)},
                      {"cuda_graph",
                       {{"prefill", 0.0},
                        {"decode", 0.0},
                        {"target_verify", 0.0},
                        {"draft_prefill", 0.0},
                        {"draft_decode", 0.0},
                        {"draft_extend", 0.0}}},
                      {"tokenizer_e2e", seconds(process_start, std::chrono::steady_clock::now())}};
  ctx.starting = false;
  RADIX_LOG_INFO("The server is fired up and ready to roll! Listening on http://{}:{}",
                 http_options.host, server.port());
  std::unique_ptr<rs::metrics::MetricsPusher> pusher;
  if (*metrics_push) {
    pusher = std::make_unique<rs::metrics::MetricsPusher>(
        (*metrics_push)->options, (*metrics_push)->url,
        [&ctx] { return rs::api::ScrapeMetrics(ctx); });
  }

  // Graceful shutdown: refuse new work, give requests in flight the grace period, end the rest
  // with an abort event (complete responses), then close the connections.
  const int signal_number = shutdown_signal.Wait();
  ctx.shutting_down = true;
  const double grace_s = args.GetFloat(key::kShutdownGracePeriod);
  RADIX_LOG_INFO("Received signal {}; refusing new requests, {} s for the {} in flight",
                 signal_number, grace_s, InFlight(**engine));
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(grace_s));
  while (InFlight(**engine) > 0 && std::chrono::steady_clock::now() < deadline &&
         !shutdown_signal.WaitRepeat(std::chrono::milliseconds(50))) {
  }
  if (const int64_t left = InFlight(**engine); left > 0) {
    RADIX_LOG_WARN("Aborting {} requests still running after the grace period", left);
  }
  pusher.reset();         // stops pushing (a push in flight is aborted) while the engine still runs
  (*engine)->Shutdown();  // what is left ends with an abort event ("The server is shutting down.")
  server.Shutdown();      // idle connections close; responses in flight flush first
  // SGLang dumps the recent requests once a SIGTERM drain is over.
  if (crash_dump && signal_number == SIGTERM) crash_dump->WriteNow();
  RADIX_LOG_INFO("radixserve stopped");
  return 0;
}

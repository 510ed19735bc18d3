// ServerContext: what every API handler reads - the resolved arguments, the engine, the tokenizer
// and chat template, and facts about the served model. Built once by main before the HTTP server
// starts; read-only afterwards (the engine itself is thread-safe).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/rid_registry.h"
#include "args/server_args.h"
#include "chat/chat_template.h"
#include "chat/completion_template.h"
#include "common/work_queue.h"
#include "disagg/kv_transfer.h"
#include "engine/engine.h"
#include "engine/lora_registry.h"
#include "metrics/serving_metrics.h"
#include "sampling/grammar_cache.h"
#include "tokenizer/tokenizer.h"

namespace radixserve::api {

class BackgroundStreams;
class ConcurrencyLimit;
class CrashDump;
class HealthProbe;
class RequestLog;
class ResponseStore;
class SessionStore;

// Bounds on what one HTTP call may ask for, checked before any work is done (each value is a
// server argument).
struct RequestLimits {
  int64_t max_n = 128;                   // --max-n: n (parallel samples) and best_of
  int64_t max_requests_per_call = 4096;  // --max-requests-per-call: prompts x n of one call
  int64_t max_top_logprobs = 100;        // --max-top-logprobs: top_logprobs_num / top_logprobs
};

struct ModelFacts {
  std::string model_type;                  // config.json model_type / GGUF architecture
  std::vector<std::string> architectures;  // e.g. ["LlamaForCausalLM"]
  int64_t context_len = 0;
  int64_t vocab_size = 0;
  // False on an embedding server (--is-embedding, or an encoder model): generation routes then
  // answer 400, and embedding routes answer 400 on a generation server.
  bool is_generation = true;
  // A classifier's labels (config.json id2label by id; /v1/classify); empty otherwise.
  std::vector<std::string> labels;
  // A cross-encoder's rerank score is the sigmoid of its first logit (config.json's
  // sbert_ce_default_activation_function), else the logit itself.
  bool sigmoid_scores = false;
  // Embedding models: whether vectors are L2-normalized, and Matryoshka truncation as
  // config.json declares it (is_matryoshka, or the allowed matryoshka_dimensions).
  bool normalized_embeddings = false;
  int64_t embedding_dim = 0;
  bool is_matryoshka = false;
  std::vector<int64_t> matryoshka_dimensions;  // empty: any width up to the embedding's
  // generation_config.json values used as sampling defaults (--sampling-defaults model).
  nlohmann::json generation_defaults = nlohmann::json::object();
};

// The version of the served weights (--weight-version; /update_weight_version and
// /update_weights_from_disk change it), reported in responses' meta_info and /model_info.
// Thread-safe.
class WeightVersion {
 public:
  std::string Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return value_;
  }
  void Set(std::string value) {
    std::lock_guard<std::mutex> lock(mu_);
    value_ = std::move(value);
  }

 private:
  mutable std::mutex mu_;
  std::string value_ = "default";
};

// What /update_weights_from_disk needs from the process that owns the model: reading a
// checkpoint with the server's load options, and adopting the model once the engine serves it.
// Load runs on ctx.admin_queue (it blocks while reading); Adopt on an engine thread (quick).
class WeightLoader {
 public:
  virtual ~WeightLoader() = default;
  // The checkpoint at `path` (`load_format` empty: the server's --load-format), checked to have
  // the served model's architecture and shapes, or why not.
  virtual Expected<std::shared_ptr<const model::CausalLM>> Load(const std::string& path,
                                                                const std::string& load_format) = 0;
  // The checkpoint the served model was read from, read again (/resume_memory_occupation).
  virtual Expected<std::shared_ptr<const model::CausalLM>> Reload() = 0;
  // The engine serves `model` (read from `path` with `load_format`) now: drop the old one, point
  // the LoRA registry at the new one.
  virtual void Adopt(std::shared_ptr<const model::CausalLM> model, const std::string& path,
                     const std::string& load_format) = 0;
  // The engine serves `model`, which Reload read, again.
  virtual void Restore(std::shared_ptr<const model::CausalLM> model) = 0;
  // /release_memory_occupation of the weights, once the engine dropped its reference: drop the
  // served model here and in the LoRA registry, so its memory goes back to the OS. Current() is
  // null until the next Adopt.
  virtual void Release() = 0;
  // Whether a release of the weights frees them (--enable-memory-saver, as in SGLang, where
  // without it the weights stay in place).
  virtual bool ReleasesWeights() const = 0;
  // The model served now (/get_weights_by_name reads it); null while released.
  virtual std::shared_ptr<const model::CausalLM> Current() = 0;
};

struct ServerContext {
  const args::ServerArgs* args = nullptr;
  engine::Engine* engine = nullptr;
  const tokenizer::Tokenizer* tokenizer = nullptr;    // null with --skip-tokenizer-init
  const chat::ChatTemplate* chat_template = nullptr;  // null: the model has none
  // --completion-template (fill-in-the-middle with `suffix`); null when not given.
  const chat::CompletionTemplate* completion_template = nullptr;
  metrics::ServingMetrics* metrics = nullptr;  // null unless --enable-metrics
  // Null unless --log-requests; /configure_logging replaces it (log_requests, log_requests_level).
  std::atomic<std::shared_ptr<const RequestLog>> request_log;
  CrashDump* crash_dump = nullptr;      // null unless --crash-dump-folder
  HealthProbe* health_probe = nullptr;  // /health_generate's shared probe
  // /v1/responses' stored responses (previous_response_id, GET /v1/responses/{id}); null: none
  // are kept and store: true answers as if each was dropped at once.
  ResponseStore* response_store = nullptr;
  // The event logs of background Responses created with stream: true, and the one-thread queue
  // where background calls format their events; null: background streaming is refused.
  BackgroundStreams* background_streams = nullptr;
  WorkQueue* background_queue = nullptr;
  // SGLang's sessions (/open_session, session_params); null in tests that do not need them.
  SessionStore* sessions = nullptr;
  // Compiles (and caches) the json_schema / regex / ebnf / structural_tag constraints of requests.
  // Null when constrained decoding is off; such requests then get a 400 naming
  // grammar_disabled_reason.
  sampling::GrammarCache* grammar_cache = nullptr;
  std::string grammar_disabled_reason;
  // Where constraints missing from the cache are compiled, so that neither an HTTP I/O thread nor
  // the engine thread waits on a compilation (SGLang's grammar queue; its length is
  // sglang:num_grammar_queue_reqs). Null (tests, fuzzers): they compile where they are built.
  WorkQueue* grammar_queue = nullptr;
  // The LoRA adapters requests may name (lora_path, "model": "<base>:<adapter>"); null unless
  // --enable-lora or --lora-paths.
  engine::LoraRegistry* lora_registry = nullptr;
  // --disaggregation-mode prefill|decode: publishes (prefill) or fetches (decode) prompt K/V rows
  // of requests with a bootstrap_room; null on an ordinary server.
  disagg::KvTransfer* kv_transfer = nullptr;
  // /update_weights_from_disk's loader and /get_weights_by_name's model; null: an embedding
  // server, tests.
  WeightLoader* weight_loader = nullptr;
  // Slow administrative work off the I/O and engine threads (profile traces); null: inline.
  WorkQueue* admin_queue = nullptr;
  // Where POST /load_lora_adapter reads adapter files (off the I/O threads); null: inline.
  WorkQueue* lora_queue = nullptr;
  // RTP-LLM's --concurrency-limit (with --concurrency-with-block) over the generation calls of
  // every route; null unless the limit was given on the command line.
  ConcurrencyLimit* concurrency = nullptr;
  RequestLimits limits;
  ModelFacts model;
  std::string served_model_name;
  // --tokenizer-metrics-custom-labels-header when metrics take custom labels (--enable-metrics
  // and --tokenizer-metrics-allowed-customer-labels); empty otherwise.
  std::string metrics_labels_header;
  WeightVersion weight_version;
  // /server_info's launch_command (the command line, secrets redacted) and startup_time (SGLang's
  // phases in seconds; set before `starting` is cleared, null until then).
  std::string launch_command;
  nlohmann::json startup_time;
  // True until the startup warmup is over (main clears it before the "ready" line): the health
  // routes answer 503 meanwhile, as SGLang's do while its server is starting.
  std::atomic<bool> starting{true};
  std::atomic<bool> shutting_down{false};
  std::atomic<uint64_t> next_rid{0};
  // The rids of every call in flight (duplicate detection; exact aborts).
  RidRegistry rids;
};

}  // namespace radixserve::api

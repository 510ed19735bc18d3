#include "api/admin_api.h"

#include <unistd.h>

#include <cstdio>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/health_probe.h"
#include "api/json_body.h"
#include "api/json_fields.h"
#include "api/lora_api.h"
#include "api/openai_common.h"
#include "api/request_builder.h"
#include "api/serving.h"
#include "common/version.h"
#include "kernels/kernel_choice.h"
#include "metrics/registry.h"

namespace radixserve::api {
namespace {

using nlohmann::json;

void SendJson(ResponseWriter& writer, int status, const json& body) {
  writer.Send(status, "application/json", ToJsonText(body));
}

// The body as a JSON object ({} when empty), or a 400 already sent.
std::optional<json> ParseBodyObject(const ApiRequest& request, ResponseWriter& writer) {
  ApiExpected<json> body = ParseOptionalJsonObjectBody(request.body);
  if (!body.ok()) {
    SendResult(writer, body);
    return std::nullopt;
  }
  return std::move(body).value();
}

// Resident memory of this process, from /proc/self/statm (0 if unreadable).
int64_t ResidentBytes() {
  std::FILE* file = std::fopen("/proc/self/statm", "r");
  if (file == nullptr) return 0;
  long long pages_total = 0, pages_resident = 0;
  const int read = std::fscanf(file, "%lld %lld", &pages_total, &pages_resident);
  std::fclose(file);
  if (read != 2) return 0;
  return static_cast<int64_t>(pages_resident) * sysconf(_SC_PAGESIZE);
}

}  // namespace

void HandleHealth(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  writer->Send(ctx.starting || ctx.shutting_down ? 503 : 200, "text/plain", "");
}

void HandleHealthGenerate(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  if (ctx.starting || ctx.shutting_down || ctx.health_probe == nullptr) {
    writer->Send(503, "text/plain", "");
    return;
  }
  // Calls that arrive while a probe is in flight share its answer (no thread or request each).
  ctx.health_probe->Check(std::move(writer), fmt::format("HEALTH_CHECK_{}", NewRid(ctx)));
}

void HandleModelInfo(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  const auto& args = *ctx.args;
  SendJson(*writer, 200,
           {{"model_path", args.Get(args::key::kModelPath)},
            {"tokenizer_path", args.Get(args::key::kTokenizerPath)},
            {"is_generation", ctx.model.is_generation},
            {"preferred_sampling_params", args.Get(args::key::kPreferredSamplingParams)},
            {"weight_version", ctx.weight_version.Get()},
            {"has_image_understanding", false},
            {"has_audio_understanding", false},
            {"model_type", ctx.model.model_type},
            {"architectures", ctx.model.architectures}});
}

void HandleServerInfo(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  // Published figures only: this runs on an HTTP I/O thread and must not wait for a step.
  engine::EngineStats stats = ctx.engine->Stats();
  json info = ctx.args->PublicValues();
  info["status"] = ctx.shutting_down ? "shutting_down" : ctx.starting ? "starting" : "ready";
  info["max_total_num_tokens"] = stats.max_total_num_tokens;
  info["max_req_input_len"] = stats.context_len - 1;
  info["launch_command"] = ctx.launch_command;
  // KV events (--kv-events-config) are not published: SGLang's descriptor is null then.
  info["kv_events"] = nullptr;
  info["startup_time"] = ctx.starting ? json(nullptr) : ctx.startup_time;
  json state = ctx.args->PublicValues();
  state["last_gen_throughput"] = stats.gen_throughput;
  state["memory_usage"] = {{"token_capacity", stats.max_total_num_tokens}};
  state["num_running_reqs"] = stats.num_running_reqs;
  state["num_queued_reqs"] = stats.num_queued_reqs;
  state["token_usage"] = stats.token_usage;
  state["cache_hit_rate"] = stats.cache_hit_rate;
  // SGLang's idle leak check (every KV slot free or held by the radix cache), for tests and
  // operators: "ok", or what is wrong.
  state["kv_leak_check"] = stats.kv_leak_check;
  // Constrained decoding: output tokens appended by jump-forward (no sampling step), since start.
  state["jump_forward_tokens"] = stats.jump_forward_tokens;
  // Between /pause_generation and /continue_generation.
  state["paused"] = stats.paused;
  // What /release_memory_occupation released and no resume has taken back yet.
  json released = json::array();
  if (stats.released.kv_cache) released.push_back("kv_cache");
  if (stats.released.weights) released.push_back("weights");
  state["memory_released"] = released;
  state["num_retracted_reqs"] = stats.num_retractions;
  if (stats.storage_tier) {
    // The hierarchical cache's storage tier (docs/kv_cache.md), totals since start.
    const kv::HiCacheStats& h = stats.storage;
    state["hicache_storage"] = {{"backend", "file"},
                                {"stored_blocks", h.store.files},
                                {"stored_bytes", h.store.bytes},
                                {"backuped_tokens", h.backuped_tokens},
                                {"prefetched_tokens", h.prefetched_tokens},
                                {"prefetch_ops", h.prefetch_ops},
                                {"storage_hit_tokens", h.storage_hit_tokens},
                                {"read_blocks", h.store.read_blocks},
                                {"written_blocks", h.store.written_blocks},
                                {"failed_reads", h.store.failed_reads},
                                {"failed_writes", h.store.failed_writes},
                                {"dropped_writes", h.store.dropped_writes},
                                {"evicted_blocks", h.store.evicted_files}};
  }
  if (ctx.kv_transfer != nullptr) {
    // Prefill/decode disaggregation's transfers (docs/disaggregation.md), totals since start.
    const disagg::KvTransferStats t = ctx.kv_transfer->stats();
    state["kv_transfer"] = {{"pending_rooms", t.pending_rooms},
                            {"pending_bytes", t.pending_bytes},
                            {"sent", t.sent},
                            {"dropped", t.dropped},
                            {"abandoned", t.abandoned},
                            {"received", t.received},
                            {"failed", t.failed},
                            {"bytes_sent", t.bytes_sent},
                            {"bytes_received", t.bytes_received}};
  }
  state["rss_bytes"] = ResidentBytes();
  info["internal_states"] = json::array({state});
  info["version"] = kVersion;
  const kernels::KernelChoice& kernel_choice = kernels::ActiveKernelChoice();
  json kernel_info = {{"instruction_set", kernel_choice.table},
                      {"quantized_matmul", kernel_choice.quantized},
                      {"bf16_panels", kernel_choice.bf16_panels}};
  if (kernel_choice.bf16_panels || !kernel_choice.bf16_source.empty()) {
    kernel_info["bf16_product"] = kernels::Bf16ProductName(kernel_choice.bf16_product);
    kernel_info["bf16_product_source"] = kernel_choice.bf16_source;
    if (kernel_choice.bf16_product == kernels::Bf16Product::kAmxTile) {
      kernel_info["bf16_amx_small_steps_reproduced"] = kernel_choice.bf16_amx_small_steps;
    }
  }
  if (kernel_choice.bf16_timing) {
    kernel_info["bf16_calibration_seconds"] = {{"widen_fma", kernel_choice.bf16_timing->widen_fma},
                                               {"dot_bf16", kernel_choice.bf16_timing->dot_bf16}};
    if (kernel_choice.bf16_timing->amx_bf16 > 0.0) {
      kernel_info["bf16_calibration_seconds"]["amx_bf16"] = kernel_choice.bf16_timing->amx_bf16;
    }
  }
  if (!kernel_choice.quant_amx_source.empty()) {
    kernel_info["quant_amx_int8"] = kernel_choice.quant_amx;
  }
  if (!kernel_choice.quant_tiles_source.empty()) {
    kernel_info["quant_tiles"] = kernels::QuantTilesName(kernel_choice.quant_tiles);
    kernel_info["quant_tiles_source"] = kernel_choice.quant_tiles_source;
  }
  if (kernel_choice.quant_tiles_timing) {
    kernel_info["quant_tiles_calibration_seconds"] = {
        {"expand", kernel_choice.quant_tiles_timing->expand},
        {"compact", kernel_choice.quant_tiles_timing->compact}};
  }
  info["kernels"] = kernel_info;
  info["frontend"] = "radixserve";  // SGLang answers "python" (or "rust")
  SendJson(*writer, 200, info);
}

void HandleGetLoad(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  // One entry per data-parallel replica, as SGLang lists them.
  json load = json::array();
  for (const engine::EngineStats& stats : ctx.engine->ReplicaStats()) {
    load.push_back({{"dp_rank", stats.dp_rank},
                    {"num_reqs", stats.num_running_reqs + stats.num_queued_reqs},
                    {"num_waiting_reqs", stats.num_queued_reqs},
                    {"num_tokens", stats.used_tokens}});
  }
  SendJson(*writer, 200, load);
}

void HandleTokenLoad(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  // LightLLM's GET /token_load: shares of the KV pool, per data-parallel replica (plain numbers
  // with one replica). current_load: what the live requests hold; logical_max_load and
  // dynamic_max_load (LightLLM reports the same value for both): what they would hold run to
  // their max_new_tokens, queued prompts included.
  json current = json::array(), peak = json::array();
  for (const engine::EngineStats& stats : ctx.engine->ReplicaStats()) {
    const double total = static_cast<double>(std::max<int64_t>(stats.max_total_num_tokens, 1));
    current.push_back(static_cast<double>(stats.used_tokens) / total);
    peak.push_back(static_cast<double>(stats.peak_tokens) / total);
  }
  if (current.size() == 1) {
    current = current[0];
    peak = peak[0];
  }
  SendJson(*writer, 200,
           json{{"current_load", current}, {"logical_max_load", peak}, {"dynamic_max_load", peak}});
}

void HandleFlushCache(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  // Answered from the engine thread when the flush has run; this I/O thread moves on.
  ctx.engine->FlushCacheAsync([writer](Status flushed) {
    writer->Send(flushed.ok() ? 200 : 400, "text/plain",
                 "Cache flushed.\nPlease check backend logs for more details. (When there are "
                 "running or waiting requests, the operation will not be performed.)\n");
  });
}

void HandleClearHiCacheStorage(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  // SGLang answers in plain text: 200 once cleared, 400 without a storage tier.
  ctx.engine->ClearStorageAsync([writer](Status cleared) {
    writer->Send(
        cleared.ok() ? 200 : 400, "text/plain",
        cleared.ok() ? "Hierarchical cache storage backend cleared.\n" : cleared.message() + "\n");
  });
}

std::string ScrapeMetrics(ServerContext& ctx) {
  // Scheduler-side gauges are read from the engine at scrape time.
  engine::EngineStats stats = ctx.engine->Stats();
  metrics::SchedulerStats scheduler;
  scheduler.num_running_reqs = stats.num_running_reqs;
  scheduler.num_used_tokens = stats.used_tokens + stats.cached_tokens;
  scheduler.token_usage = stats.token_usage;
  scheduler.gen_throughput = stats.gen_throughput;
  scheduler.spec_accept_length = stats.spec_accept_length;
  scheduler.spec_accept_rate = stats.spec_accept_rate;
  scheduler.num_queue_reqs = stats.num_queued_reqs;
  if (ctx.grammar_queue != nullptr) scheduler.num_grammar_queue_reqs = ctx.grammar_queue->pending();
  scheduler.cache_hit_rate = stats.cache_hit_rate;
  scheduler.max_total_num_tokens = stats.max_total_num_tokens;
  scheduler.num_retracted_reqs = stats.num_retractions;
  ctx.metrics->Scheduler().LogStats(scheduler);
  for (const engine::EngineStats& replica : ctx.engine->ReplicaStats()) {
    if (!replica.storage_tier) continue;
    const kv::HiCacheStats& h = replica.storage;
    const auto distribution = [](const kv::BucketCounts& b) {
      return metrics::StorageStats::Distribution{b.counts, b.sum};
    };
    ctx.metrics->LogStorageStats(
        {static_cast<int64_t>(h.prefetched_tokens), static_cast<int64_t>(h.backuped_tokens),
         distribution(h.prefetch_pgs), distribution(h.backup_pgs),
         distribution(h.prefetch_bandwidth), distribution(h.backup_bandwidth)},
        replica.dp_rank);
  }
  return ctx.metrics->Expose();
}

void HandleMetrics(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  if (ctx.metrics == nullptr) {
    writer->Send(404, "application/json",
                 ToJsonText(ApiError{
                     404,
                     "Metrics are off: start the server with --enable-metrics.",
                     "NotFoundError",
                     {}}.OpenAiBody()));
    return;
  }
  writer->Send(200, metrics::Registry::kContentType, ScrapeMetrics(ctx));
}

void HandleAbortRequest(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer) {
  std::optional<json> body = ParseBodyObject(request, *writer);
  if (!body) return;
  auto abort_all = ReadOptionalBool(*body, "abort_all");
  if (!abort_all.ok()) return openai::SendValidationError(*writer, abort_all.status().message());
  auto rid = ReadOptionalString(*body, "rid");
  if (!rid.ok()) return openai::SendValidationError(*writer, rid.status().message());
  if (ctx.metrics != nullptr) ctx.metrics->Requests().ObserveAbortedRequest();
  // SGLang's semantics: a rid aborts every request whose rid starts with it (the n samples of a
  // request share its rid as prefix). An admin route: see routes.cpp.
  if (abort_all->value_or(false)) {
    ctx.engine->Abort("", engine::AbortMatch::kRidPrefix);
  } else if (rid->has_value() && !(*rid)->empty()) {
    ctx.engine->Abort(**rid, engine::AbortMatch::kRidPrefix);
  }
  writer->Send(200, "text/plain", "");
}

void HandleTokenize(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer) {
  std::optional<json> parsed = ParseBodyObject(request, *writer);
  if (!parsed) return;
  const json& body = *parsed;
  if (!body.contains("prompt")) {
    openai::SendValidationError(*writer, "Field 'prompt' is required.");
    return;
  }
  if (ctx.tokenizer == nullptr) {
    openai::SendError(*writer, BadRequest("The tokenizer is not initialized."));
    return;
  }
  auto add_special_field = ReadOptionalBool(body, "add_special_tokens");
  if (!add_special_field.ok()) {
    return openai::SendValidationError(*writer, add_special_field.status().message());
  }
  const bool add_special = add_special_field->value_or(true);
  auto encode = [&](const std::string& text) {
    auto ids =
        ctx.tokenizer->Encode(text, {.add_special_tokens = add_special, .parse_special = true});
    return std::vector<int32_t>(ids.begin(), ids.end());
  };
  const json& prompt = body["prompt"];
  json out;
  if (prompt.is_string()) {
    auto ids = encode(prompt.get<std::string>());
    out = {{"tokens", ids}, {"count", ids.size()}};
  } else if (prompt.is_array() && std::all_of(prompt.begin(), prompt.end(),
                                              [](const json& p) { return p.is_string(); })) {
    json tokens = json::array(), counts = json::array();
    for (const auto& p : prompt) {
      auto ids = encode(p.get<std::string>());
      counts.push_back(ids.size());
      tokens.push_back(std::move(ids));
    }
    out = {{"tokens", tokens}, {"count", counts}};
  } else {
    openai::SendValidationError(*writer, "prompt must be a string or a list of strings.");
    return;
  }
  out["max_model_len"] = ctx.model.context_len;
  SendJson(*writer, 200, out);
}

void HandleDetokenize(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer) {
  std::optional<json> parsed = ParseBodyObject(request, *writer);
  if (!parsed) return;
  const json& body = *parsed;
  if (!body.contains("tokens") || !body["tokens"].is_array()) {
    openai::SendValidationError(*writer, "Field 'tokens' is required (a list of token ids).");
    return;
  }
  if (ctx.tokenizer == nullptr) {
    openai::SendError(*writer, BadRequest("The tokenizer is not initialized."));
    return;
  }
  auto skip_field = ReadOptionalBool(body, "skip_special_tokens");
  if (!skip_field.ok()) return openai::SendValidationError(*writer, skip_field.status().message());
  const bool skip = skip_field->value_or(true);
  auto decode = [&](const json& ids) -> std::optional<std::string> {
    std::vector<int32_t> tokens;
    for (const auto& id : ids) {
      if (!id.is_number_integer()) return std::nullopt;
      int64_t value = id.get<int64_t>();
      if (value < 0 || value >= ctx.model.vocab_size) return std::nullopt;
      tokens.push_back(static_cast<int32_t>(value));
    }
    return ctx.tokenizer->Decode(
        tokens, {.skip_special_tokens = skip, .spaces_between_special_tokens = true});
  };
  const json& tokens = body["tokens"];
  json out;
  if (!tokens.empty() && tokens[0].is_array()) {
    json texts = json::array();
    for (const auto& row : tokens) {
      auto text = decode(row);
      if (!text) {
        openai::SendError(*writer, BadRequest("tokens must be token ids inside the vocabulary."));
        return;
      }
      texts.push_back(*text);
    }
    out = {{"text", texts}};
  } else {
    auto text = decode(tokens);
    if (!text) {
      openai::SendError(*writer, BadRequest("tokens must be token ids inside the vocabulary."));
      return;
    }
    out = {{"text", *text}};
  }
  SendJson(*writer, 200, out);
}

namespace {

json ModelCard(const ServerContext& ctx) {
  return {{"id", ctx.served_model_name},           {"object", "model"},
          {"created", openai::NowSeconds()},       {"owned_by", "sglang"},
          {"root", ctx.served_model_name},         {"parent", nullptr},
          {"max_model_len", ctx.model.context_len}};
}

}  // namespace

void HandleListModels(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  json data = json::array({ModelCard(ctx)});
  for (json& card : LoraModelCards(ctx)) data.push_back(std::move(card));
  SendJson(*writer, 200, {{"object", "list"}, {"data", std::move(data)}});
}

void HandleGetModel(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer) {
  for (json& card : LoraModelCards(ctx)) {
    if (card["id"] == request.path_param) return SendJson(*writer, 200, card);
  }
  if (request.path_param != ctx.served_model_name) {
    SendJson(*writer, 404,
             {{"error",
               {{"message", fmt::format("The model '{}' does not exist", request.path_param)},
                {"type", "invalid_request_error"},
                {"param", "model"},
                {"code", "model_not_found"}}}});
    return;
  }
  SendJson(*writer, 200, ModelCard(ctx));
}

}  // namespace radixserve::api

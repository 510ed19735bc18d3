#include "api/admin_api.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/openai_common.h"
#include "api/request_builder.h"
#include "common/version.h"

namespace radixserve::api {
namespace {

using nlohmann::json;

constexpr auto kHealthGenerateTimeout = std::chrono::seconds(20);

void SendJson(ResponseWriter& writer, int status, const json& body) {
  writer.Send(status, "application/json", ToJsonText(body));
}

json ParseBodyObject(const ApiRequest& request) {
  if (request.body.empty()) return json::object();
  json body = json::parse(request.body, nullptr, false);
  return body.is_object() ? body : json();
}

}  // namespace

void HandleHealth(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  writer->Send(ctx.starting || ctx.shutting_down ? 503 : 200, "text/plain", "");
}

void HandleHealthGenerate(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  if (ctx.starting || ctx.shutting_down) {
    writer->Send(503, "text/plain", "");
    return;
  }
  // One greedy token; healthy as soon as the engine produces any output.
  struct Probe {
    std::mutex mu;
    std::condition_variable cv;
    bool answered = false;
  };
  auto probe = std::make_shared<Probe>();
  engine::GenerateRequest request;
  request.rid = fmt::format("HEALTH_CHECK_{}", NewRid(ctx));
  request.input_ids = {0};
  request.sampling.max_new_tokens = 1;
  request.sampling.top_k = 1;
  request.detokenize = false;
  std::string rid = request.rid;
  auto answer = [probe, writer](int status) {
    std::lock_guard lock(probe->mu);
    if (probe->answered) return;
    probe->answered = true;
    writer->Send(status, "text/plain", "");
    probe->cv.notify_all();
  };
  Status submitted = ctx.engine->Submit(std::move(request), [answer](engine::RequestEvent event) {
    bool failed = event.finished && event.finish_reason &&
                  event.finish_reason->kind == engine::FinishKind::kAbort;
    answer(failed ? 503 : 200);
  });
  if (!submitted.ok()) {
    answer(503);
    return;
  }
  std::thread([probe, answer, rid, engine = ctx.engine] {
    std::unique_lock lock(probe->mu);
    bool done = probe->cv.wait_for(lock, kHealthGenerateTimeout, [&] { return probe->answered; });
    lock.unlock();
    if (!done) {
      engine->Abort(rid);
      answer(503);
    }
  }).detach();
}

void HandleModelInfo(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  const auto& args = *ctx.args;
  SendJson(*writer, 200,
           {{"model_path", args.Get("model-path")},
            {"tokenizer_path", args.Get("tokenizer-path")},
            {"is_generation", true},
            {"preferred_sampling_params", args.Get("preferred-sampling-params")},
            {"weight_version", ctx.weight_version},
            {"has_image_understanding", false},
            {"has_audio_understanding", false},
            {"model_type", ctx.model.model_type},
            {"architectures", ctx.model.architectures}});
}

void HandleServerInfo(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  engine::EngineStats stats = ctx.engine->Stats();
  json info = ctx.args->values();
  info["status"] = ctx.shutting_down ? "shutting_down" : ctx.starting ? "starting" : "ready";
  info["max_total_num_tokens"] = stats.max_total_num_tokens;
  info["max_req_input_len"] = stats.context_len - 1;
  json state = ctx.args->values();
  state["last_gen_throughput"] = stats.gen_throughput;
  state["memory_usage"] = {{"token_capacity", stats.max_total_num_tokens}};
  state["num_running_reqs"] = stats.num_running_reqs;
  state["num_queued_reqs"] = stats.num_queued_reqs;
  state["token_usage"] = stats.token_usage;
  state["cache_hit_rate"] = stats.cache_hit_rate;
  // SGLang's idle leak check (every KV slot free or held by the radix cache), for tests and
  // operators: "ok", or what is wrong.
  Status leaks = ctx.engine->CheckLeaks();
  state["kv_leak_check"] = leaks.ok() ? std::string("ok") : leaks.message();
  info["internal_states"] = json::array({state});
  info["version"] = kVersion;
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

void HandleFlushCache(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  Status flushed = ctx.engine->FlushCache();
  writer->Send(flushed.ok() ? 200 : 400, "text/plain",
               "Cache flushed.\nPlease check backend logs for more details. (When there are "
               "running or waiting requests, the operation will not be performed.)\n");
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
  // Scheduler-side gauges are read from the engine at scrape time.
  engine::EngineStats stats = ctx.engine->Stats();
  metrics::SchedulerStats scheduler;
  scheduler.num_running_reqs = stats.num_running_reqs;
  scheduler.num_used_tokens = stats.used_tokens + stats.cached_tokens;
  scheduler.token_usage = stats.token_usage;
  scheduler.gen_throughput = stats.gen_throughput;
  scheduler.num_queue_reqs = stats.num_queued_reqs;
  scheduler.cache_hit_rate = stats.cache_hit_rate;
  scheduler.max_total_num_tokens = stats.max_total_num_tokens;
  scheduler.num_retracted_reqs = stats.num_retractions;
  ctx.metrics->Scheduler().LogStats(scheduler);
  writer->Send(200, "text/plain; version=0.0.4; charset=utf-8", ctx.metrics->Expose());
}

void HandleAbortRequest(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer) {
  json body = ParseBodyObject(request);
  if (body.is_null()) {
    openai::SendValidationError(*writer, "The request body must be a JSON object.");
    return;
  }
  if (ctx.metrics != nullptr) ctx.metrics->Requests().ObserveAbortedRequest();
  if (body.value("abort_all", false)) {
    ctx.engine->Abort("");
  } else if (body.contains("rid") && body["rid"].is_string() &&
             !body["rid"].get<std::string>().empty()) {
    ctx.engine->Abort(body["rid"].get<std::string>());
  }
  writer->Send(200, "text/plain", "");
}

void HandleTokenize(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer) {
  json body = ParseBodyObject(request);
  if (body.is_null() || !body.contains("prompt")) {
    openai::SendValidationError(*writer, "Field 'prompt' is required.");
    return;
  }
  if (ctx.tokenizer == nullptr) {
    openai::SendError(*writer, BadRequest("The tokenizer is not initialized."));
    return;
  }
  bool add_special = body.value("add_special_tokens", true);
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
  json body = ParseBodyObject(request);
  if (body.is_null() || !body.contains("tokens") || !body["tokens"].is_array()) {
    openai::SendValidationError(*writer, "Field 'tokens' is required (a list of token ids).");
    return;
  }
  if (ctx.tokenizer == nullptr) {
    openai::SendError(*writer, BadRequest("The tokenizer is not initialized."));
    return;
  }
  bool skip = body.value("skip_special_tokens", true);
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
  SendJson(*writer, 200, {{"object", "list"}, {"data", json::array({ModelCard(ctx)})}});
}

void HandleGetModel(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer) {
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

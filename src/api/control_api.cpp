#include "api/control_api.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/json_body.h"
#include "api/json_fields.h"
#include "api/request_log.h"
#include "api/serving.h"
#include "api/session_store.h"
#include "args/arg_keys.h"
#include "common/log.h"
#include "common/replace_file.h"
#include "common/work_queue.h"

namespace radixserve::api {
namespace {

using nlohmann::json;

// The body's fields, each read by one of `read`'s calls: an error names the field. Every field of
// these routes has a default, so an empty body is {}.
ApiExpected<json> ReadBody(const ApiRequest& request) {
  return ParseOptionalJsonObjectBody(request.body);
}

ApiExpected<engine::PauseMode> ReadPauseMode(const json& body) {
  RADIX_ASSIGN_OR_RETURN(std::optional<std::string> mode, Field(ReadOptionalString(body, "mode")));
  const std::string name = mode.value_or("abort");
  if (name == "abort") return engine::PauseMode::kAbort;
  if (name == "retract") return engine::PauseMode::kRetract;
  if (name == "in_place") return engine::PauseMode::kInPlace;
  return InvalidRequest("Input should be 'abort', 'retract' or 'in_place': mode = '" + name + "'.");
}

// /start_profile's request (SGLang's ProfileReq) as this server applies it.
struct ProfileRequest {
  engine::ProfileOptions options;
  std::filesystem::path output_dir;
  std::string profile_id;
  std::string prefix;
  bool merge = false;
};

// `default_dir`: where traces go without output_dir (SGLang's $SGLANG_TORCH_PROFILER_DIR, else
// RTP-LLM's --torch-cuda-profiler-dir, else /tmp).
ApiExpected<ProfileRequest> ReadProfileRequest(const json& body, const std::string& default_dir) {
  ProfileRequest out;
  for (const auto& [key, value] : body.items()) {
    static const std::set<std::string> kFields = {
        "output_dir",       "start_step",     "num_steps",      "activities",
        "profile_by_stage", "with_stack",     "record_shapes",  "profile_id",
        "merge_profiles",   "profile_prefix", "profile_stages", "detailed_annotations",
        "req_type"};
    if (kFields.count(key) == 0)
      return InvalidRequest("ProfileReq got an unexpected field '" + key + "'");
    (void)value;
  }
  RADIX_ASSIGN_OR_RETURN(std::optional<std::string> dir,
                         Field(ReadOptionalString(body, "output_dir")));
  out.output_dir = dir.value_or(default_dir);
  RADIX_ASSIGN_OR_RETURN(std::optional<int64_t> start,
                         Field(ReadOptionalInt(body, "start_step", 0)));
  if (start.value_or(0) > 0) out.options.start_step = start;
  RADIX_ASSIGN_OR_RETURN(std::optional<int64_t> steps,
                         Field(ReadOptionalInt(body, "num_steps", 0)));
  if (steps.value_or(0) > 0) out.options.num_steps = steps;
  RADIX_ASSIGN_OR_RETURN(std::optional<bool> by_stage,
                         Field(ReadOptionalBool(body, "profile_by_stage")));
  out.options.by_stage = by_stage.value_or(false);
  RADIX_ASSIGN_OR_RETURN(std::optional<bool> detailed,
                         Field(ReadOptionalBool(body, "detailed_annotations")));
  out.options.detailed = detailed.value_or(false);
  RADIX_ASSIGN_OR_RETURN(std::optional<bool> merge,
                         Field(ReadOptionalBool(body, "merge_profiles")));
  out.merge = merge.value_or(false);
  RADIX_ASSIGN_OR_RETURN(std::optional<std::string> id,
                         Field(ReadOptionalString(body, "profile_id")));
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  out.profile_id = id.value_or(fmt::format("{:.6f}", now));
  RADIX_ASSIGN_OR_RETURN(std::optional<std::string> prefix,
                         Field(ReadOptionalString(body, "profile_prefix")));
  out.prefix = prefix.value_or("");
  for (const char* list : {"activities", "profile_stages"}) {
    auto it = body.find(list);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_array()) return InvalidRequest(std::string(list) + " must be a list of strings.");
    for (const json& item : *it) {
      if (!item.is_string())
        return InvalidRequest(std::string(list) + " must be a list of strings.");
      const std::string name = item.get<std::string>();
      if (std::string_view(list) == "profile_stages") {
        if (name != "prefill" && name != "decode" && name != "mixed") {
          return InvalidRequest("profile_stages: '" + name +
                                "' is not a stage (prefill, decode, mixed).");
        }
        out.options.stages.push_back(name);
      } else if (name != "CPU" && name != "GPU" && name != "MEM" && name != "RPD") {
        return InvalidRequest("activities: '" + name + "' is not one of CPU, GPU, MEM, RPD.");
      }
    }
  }
  // The device-side activities and torch's operator details have nothing to record on CPU.
  static std::once_flag warned;
  const bool device_asked = body.contains("activities") && body["activities"].is_array() &&
                            std::any_of(body["activities"].begin(), body["activities"].end(),
                                        [](const json& a) { return a != "CPU"; });
  const bool torch_asked = (body.contains("with_stack") && body["with_stack"] == true) ||
                           (body.contains("record_shapes") && body["record_shapes"] == true);
  if (device_asked || torch_asked) {
    std::call_once(warned, [] {
      RADIX_LOG_WARN(
          "start_profile: radixserve records CPU step timings only; GPU/MEM/RPD "
          "activities, with_stack and record_shapes have nothing to record on cpu.");
    });
  }
  return out;
}

// Chrome's Trace Event Format (one complete event per step; a metadata event names each
// replica), as chrome://tracing and Perfetto read it.
json TraceJson(const std::vector<engine::StepTrace>& traces) {
  json events = json::array();
  for (const engine::StepTrace& trace : traces) {
    const int64_t origin_us =
        std::chrono::duration_cast<std::chrono::microseconds>(trace.started.time_since_epoch())
            .count();
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", trace.dp_rank},
                      {"args", {{"name", fmt::format("radixserve DP{}", trace.dp_rank)}}}});
    for (const engine::StepRecord& step : trace.steps) {
      json args = {{"forward_ct", step.forward_ct},
                   {"num_seqs", step.num_seqs},
                   {"num_tokens", step.num_tokens},
                   {"cached_tokens", step.cached_tokens}};
      if (step.running_reqs) args["num_running_reqs"] = *step.running_reqs;
      if (step.queued_reqs) args["num_queued_reqs"] = *step.queued_reqs;
      if (step.token_usage) args["token_usage"] = *step.token_usage;
      events.push_back({{"name", step.stage},
                        {"cat", "step"},
                        {"ph", "X"},
                        {"ts", origin_us + step.start_us},
                        {"dur", step.duration_us},
                        {"pid", trace.dp_rank},
                        {"tid", 0},
                        {"args", std::move(args)}});
    }
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

// Replaced whole (ReplaceFile), so a reader that sees the file sees all of it (a client polling for
// the trace had read it empty, half written).
void WriteTrace(const std::filesystem::path& path, const std::vector<engine::StepTrace>& traces) {
  if (!ReplaceFile(path, TraceJson(traces).dump())) {
    RADIX_LOG_ERROR("Could not write the profile trace {}.", path.string());
    return;
  }
  RADIX_LOG_INFO("Profile trace written: {}", path.string());
}

// Gathers the replicas' traces of one recording, writes each (and the merged one) off the engine
// thread, and answers a /start_profile that waits for the recording (num_steps).
struct ProfileRun : std::enable_shared_from_this<ProfileRun> {
  ProfileRequest request;
  size_t replicas = 1;
  WorkQueue* queue = nullptr;
  std::mutex mu;
  std::vector<engine::StepTrace> traces;
  ResponseWriterPtr waiting;  // set when /start_profile answers at the end

  void Add(engine::StepTrace trace) {
    std::vector<engine::StepTrace> all;
    {
      std::lock_guard lock(mu);
      traces.push_back(std::move(trace));
      if (traces.size() < replicas) return;
      all = std::move(traces);
    }
    auto write = [self = shared_from_this(), all = std::move(all)] {
      const ProfileRequest& request = self->request;
      for (const engine::StepTrace& trace : all) {
        WriteTrace(request.output_dir / fmt::format("{}{}-DP-{}.trace.json", request.prefix,
                                                    request.profile_id, trace.dp_rank),
                   {trace});
      }
      if (request.merge) {
        WriteTrace(request.output_dir / fmt::format("merged-{}.trace.json", request.profile_id),
                   all);
      }
      if (self->waiting) self->waiting->Send(200, "text/plain", "Start profiling.\n");
    };
    PostOrRun(queue, std::move(write));
  }
};

}  // namespace

void HandleStartProfile(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer) {
  ApiExpected<json> body = ReadBody(request);
  if (!body.ok()) return SendResult(*writer, body);
  const char* env_dir = std::getenv("SGLANG_TORCH_PROFILER_DIR");
  std::string default_dir = env_dir != nullptr ? env_dir : "";
  if (default_dir.empty()) default_dir = ctx.args->GetString(args::key::kTorchCudaProfilerDir);
  if (default_dir.empty()) default_dir = "/tmp";
  ApiExpected<ProfileRequest> parsed = ReadProfileRequest(*body, default_dir);
  if (!parsed.ok()) return SendResult(*writer, parsed.status());
  auto run = std::make_shared<ProfileRun>();
  run->request = std::move(*parsed);
  run->replicas = static_cast<size_t>(ctx.engine->ReplicaStats().size());
  run->queue = ctx.admin_queue;
  const bool wait = run->request.options.num_steps.has_value();
  if (wait) run->waiting = writer;
  engine::ProfileOptions options = run->request.options;
  ctx.engine->StartProfileAsync(
      std::move(options), [run](engine::StepTrace trace) { run->Add(std::move(trace)); },
      [writer, wait](Status started) {
        if (!started.ok()) return SendResult(*writer, FromStatus(started));
        if (!wait) writer->Send(200, "text/plain", "Start profiling.\n");
      });
}

void HandleStopProfile(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  ctx.engine->StopProfileAsync([writer](Status stopped) {
    if (!stopped.ok()) return SendResult(*writer, FromStatus(stopped));
    writer->Send(200, "text/plain", "Stop profiling. This will take some time.\n");
  });
}

namespace {

// Starts or stops the recording; SGLang's answer text once the engine did.
void ExpertRecordCommand(ServerContext& ctx, engine::Engine::ExpertRecordAction action,
                         std::string answer, ResponseWriterPtr writer) {
  ctx.engine->ExpertRecordAsync(
      action, [writer, answer = std::move(answer)](Expected<std::vector<engine::ExpertDump>> done) {
        if (!done.ok()) return SendResult(*writer, FromStatus(done.status()));
        writer->Send(200, "text/plain", answer);
      });
}

}  // namespace

void HandleStartExpertRecord(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  ExpertRecordCommand(ctx, engine::Engine::ExpertRecordAction::kStart,
                      "Start recording the expert distribution.\n", std::move(writer));
}

void HandleStopExpertRecord(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  ExpertRecordCommand(ctx, engine::Engine::ExpertRecordAction::kStop,
                      "Stop recording the expert distribution.\n", std::move(writer));
}

void HandleDumpExpertRecord(ServerContext& ctx, const ApiRequest&, ResponseWriterPtr writer) {
  const char* env_dir = std::getenv("SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR");
  const std::filesystem::path dir = env_dir != nullptr && *env_dir != '\0' ? env_dir : "/tmp";
  WorkQueue* queue = ctx.admin_queue;
  ctx.engine->ExpertRecordAsync(
      engine::Engine::ExpertRecordAction::kDump,
      [writer, dir, queue](Expected<std::vector<engine::ExpertDump>> done) {
        if (!done.ok()) return SendResult(*writer, FromStatus(done.status()));
        // Serialized and written off the engine thread (a stat dump holds buffer x layers x
        // experts counts).
        PostOrRun(queue, [writer, dir, dumps = std::move(done).value()] {
          const auto now = std::chrono::system_clock::now().time_since_epoch();
          const double seconds = std::chrono::duration<double>(now).count();
          std::error_code error;
          std::filesystem::create_directories(dir, error);
          for (size_t i = 0; i < dumps.size(); ++i) {
            const engine::ExpertDump& dump = dumps[i];
            // SGLang's names: one stat file (rank 0's); per_pass / per_token one per rank.
            const std::filesystem::path path =
                dir /
                (dump.mode == engine::ExpertRecordMode::kStat && dumps.size() == 1
                     ? fmt::format("expert_distribution_recorder_{:.6f}.json", seconds)
                     : fmt::format("expert_distribution_recorder_{:.6f}_{}.json", seconds, i));
            // Replaced whole, as the profile trace is: a reader never sees half a dump.
            if (!ReplaceFile(path, dump.document.dump())) {
              return SendResult(*writer,
                                FromStatus(Status(StatusCode::kUnavailable,
                                                  "Could not write the expert distribution to " +
                                                      path.string() + ".")));
            }
            RADIX_LOG_INFO("Write expert distribution to {}", path.string());
          }
          writer->Send(200, "text/plain", "Dump expert distribution record.\n");
        });
      });
}

void HandlePauseGeneration(ServerContext& ctx, const ApiRequest& request,
                           ResponseWriterPtr writer) {
  ApiExpected<json> body = ReadBody(request);
  if (!body.ok()) return SendResult(*writer, body);
  ApiExpected<engine::PauseMode> mode = ReadPauseMode(*body);
  if (!mode.ok()) return SendResult(*writer, mode.status());
  // Answered from the engine thread once every replica has paused; this I/O thread moves on.
  ctx.engine->PauseAsync(*mode, [writer] {
    SendResult(*writer, json{{"message", "Generation paused successfully."}, {"status", "ok"}});
  });
}

void HandleContinueGeneration(ServerContext& ctx, const ApiRequest& request,
                              ResponseWriterPtr writer) {
  ApiExpected<json> body = ReadBody(request);
  if (!body.ok()) return SendResult(*writer, body);
  // torch_empty_cache returns CUDA allocator blocks to the driver: there are none on CPU, so the
  // field is read for its type only.
  ApiExpected<std::optional<bool>> empty_cache =
      Field(ReadOptionalBool(*body, "torch_empty_cache"));
  if (!empty_cache.ok()) return SendResult(*writer, empty_cache.status());
  ctx.engine->Continue();
  SendResult(*writer, json{{"message", "Generation continued successfully."}, {"status", "ok"}});
}

void HandleUpdateWeightVersion(ServerContext& ctx, const ApiRequest& request,
                               ResponseWriterPtr writer) {
  ApiExpected<json> body = ReadBody(request);
  if (!body.ok()) return SendResult(*writer, body);
  ApiExpected<std::optional<std::string>> version = Field(ReadOptionalString(*body, "new_version"));
  if (!version.ok()) return SendResult(*writer, version.status());
  if (!version->has_value())
    return SendResult(*writer, InvalidRequest("Field 'new_version' is required."));
  ApiExpected<std::optional<bool>> abort_all = Field(ReadOptionalBool(*body, "abort_all_requests"));
  if (!abort_all.ok()) return SendResult(*writer, abort_all.status());
  if (abort_all->value_or(true)) ctx.engine->Abort("", engine::AbortMatch::kRidPrefix);
  ctx.weight_version.Set(**version);
  SendResult(*writer, json{{"success", true},
                           {"message", "Weight version updated to " + **version},
                           {"new_version", **version}});
}

void HandleUpdateWeightsFromDisk(ServerContext& ctx, const ApiRequest& request,
                                 ResponseWriterPtr writer) {
  auto answer = [writer](bool success, const std::string& message, int64_t held) {
    writer->Send(success ? 200 : 400, "application/json",
                 ToJsonText(json{
                     {"success", success}, {"message", message}, {"num_paused_requests", held}}));
  };
  ApiExpected<json> body = ReadBody(request);
  if (!body.ok()) return SendResult(*writer, body);
  for (auto it = body->begin(); it != body->end(); ++it) {
    static const std::set<std::string> kFields = {
        "model_path",        "load_format", "abort_all_requests",   "weight_version", "is_async",
        "torch_empty_cache", "keep_pause",  "recapture_cuda_graph", "token_step",     "flush_cache",
        "manifest"};
    if (kFields.count(it.key()) == 0) {
      return SendResult(*writer, InvalidRequest("Unsupported field '" + it.key() +
                                                "' in an update_weights_from_disk request."));
    }
  }
  ApiExpected<std::optional<std::string>> path = Field(ReadOptionalString(*body, "model_path"));
  if (!path.ok()) return SendResult(*writer, path.status());
  if (!path->has_value())
    return SendResult(*writer, InvalidRequest("Field 'model_path' is required."));
  ApiExpected<std::optional<std::string>> format = Field(ReadOptionalString(*body, "load_format"));
  if (!format.ok()) return SendResult(*writer, format.status());
  ApiExpected<std::optional<std::string>> version =
      Field(ReadOptionalString(*body, "weight_version"));
  if (!version.ok()) return SendResult(*writer, version.status());
  std::map<std::string, bool> flags = {{"abort_all_requests", false},   {"is_async", false},
                                       {"torch_empty_cache", false},    {"keep_pause", false},
                                       {"recapture_cuda_graph", false}, {"flush_cache", true}};
  for (auto& [name, value] : flags) {
    ApiExpected<std::optional<bool>> flag = Field(ReadOptionalBool(*body, name));
    if (!flag.ok()) return SendResult(*writer, flag.status());
    value = flag->value_or(value);
  }
  ApiExpected<std::optional<int64_t>> token_step = Field(ReadOptionalInt(*body, "token_step"));
  if (!token_step.ok()) return SendResult(*writer, token_step.status());
  if (token_step->value_or(0) != 0) {
    return SendResult(*writer, BadRequest("token_step is not supported by radixserve (outputs do "
                                          "not report the trainer step of their weights)."));
  }
  if (body->contains("manifest") && !(*body)["manifest"].is_null()) {
    return SendResult(*writer, BadRequest("manifest is not supported: the weights are read from "
                                          "model_path."));
  }
  if (flags["is_async"]) {
    return SendResult(*writer, BadRequest("is_async is not supported: the call answers once the "
                                          "new weights serve requests."));
  }
  if (flags["torch_empty_cache"] || flags["recapture_cuda_graph"]) {
    static std::once_flag warned;
    std::call_once(warned, [] {
      RADIX_LOG_WARN(
          "update_weights_from_disk: torch_empty_cache and recapture_cuda_graph have "
          "no effect on cpu (no CUDA cache, no CUDA graphs).");
    });
  }
  if (ctx.weight_loader == nullptr) {
    return answer(false, "This server cannot update its weights (an embedding server).", 0);
  }
  if (flags["abort_all_requests"]) ctx.engine->Abort("", engine::AbortMatch::kRidPrefix);
  RADIX_LOG_INFO("Start update_weights. Load format={}", format->value_or("(the server's)"));
  auto task = [&ctx, writer, answer, path = **path, format = format->value_or(""),
               version = *version, flush = flags["flush_cache"], keep_pause = flags["keep_pause"]] {
    Expected<std::shared_ptr<const model::CausalLM>> model = ctx.weight_loader->Load(path, format);
    if (!model.ok()) {
      return answer(false, "Failed to update weights: " + model.status().message(), 0);
    }
    std::shared_ptr<const model::CausalLM> loaded = *model;
    ctx.engine->UpdateModelAsync(
        loaded, flush,
        [&ctx, answer, loaded, path, format, version, keep_pause](Status status, int64_t held) {
          if (!status.ok()) {
            return answer(false, "Failed to update weights: " + status.message(), held);
          }
          ctx.weight_loader->Adopt(loaded, path, format);
          std::string message = "Succeeded to update model weights.";
          if (version) {
            ctx.weight_version.Set(*version);
            message += " Weight version updated to " + *version + ".";
          }
          if (keep_pause) {
            ctx.engine->PauseAsync(engine::PauseMode::kInPlace,
                                   [answer, message, held] { answer(true, message, held); });
            return;
          }
          answer(true, message, held);
        });
  };
  PostOrRun(ctx.admin_queue, std::move(task));
}

void HandleGetWeightsByName(ServerContext& ctx, const ApiRequest& request,
                            ResponseWriterPtr writer) {
  ApiExpected<json> body = ReadBody(request);
  if (!body.ok()) return SendResult(*writer, body);
  for (auto it = body->begin(); it != body->end(); ++it) {
    if (it.key() != "name" && it.key() != "truncate_size") {
      return SendResult(*writer, InvalidRequest("Unsupported field '" + it.key() +
                                                "' (supported: name, truncate_size)."));
    }
  }
  ApiExpected<std::optional<std::string>> name = Field(ReadOptionalString(*body, "name"));
  if (!name.ok()) return SendResult(*writer, name.status());
  if (!name->has_value()) return SendResult(*writer, InvalidRequest("Field 'name' is required."));
  ApiExpected<std::optional<int64_t>> truncate = Field(ReadOptionalInt(*body, "truncate_size", 0));
  if (!truncate.ok()) return SendResult(*writer, truncate.status());
  if (ctx.weight_loader == nullptr) {
    return SendResult(*writer, BadRequest("Get parameter by name failed: this server has no "
                                          "generation model to read."));
  }
  const std::shared_ptr<const model::CausalLM> model = ctx.weight_loader->Current();
  if (model == nullptr) {
    return SendResult(*writer, BadRequest("Get parameter by name failed: the weights are released "
                                          "(/release_memory_occupation); resume them first."));
  }
  Expected<model::CausalLM::WeightRows> rows = model->ReadWeight(**name, truncate->value_or(100));
  if (!rows.ok()) {
    return SendResult(*writer,
                      BadRequest("Get parameter by name failed: " + rows.status().message()));
  }
  SendResult(*writer, rows->one_dim ? json(rows->rows.at(0)) : json(rows->rows));
}

namespace {

// SGLang's `tags` of /release_memory_occupation and /resume_memory_occupation: "kv_cache",
// "weights", "cuda_graph"; absent, null or empty: all of them. Weights count only on a server
// that can release them (a generation server started with --enable-memory-saver; without it
// SGLang keeps them in place too, which is logged once).
ApiExpected<engine::MemoryRegions> ReadMemoryTags(ServerContext& ctx, const ApiRequest& request) {
  RADIX_ASSIGN_OR_RETURN(json parsed, ReadBody(request));
  const json& body = parsed;
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it.key() != "tags") {
      return InvalidRequest("Unsupported field '" + it.key() + "' (supported: tags).");
    }
  }
  std::vector<std::string> tags;
  if (body.contains("tags") && !body["tags"].is_null()) {
    if (!body["tags"].is_array()) return InvalidRequest("Field 'tags' must be a list of strings.");
    for (const json& tag : body["tags"]) {
      if (!tag.is_string()) return InvalidRequest("Field 'tags' must be a list of strings.");
      tags.push_back(tag.get<std::string>());
    }
  }
  if (tags.empty()) tags = {"kv_cache", "weights", "cuda_graph"};
  engine::MemoryRegions regions;
  for (const std::string& tag : tags) {
    if (tag == "kv_cache") {
      regions.kv_cache = true;
    } else if (tag == "weights") {
      if (ctx.weight_loader != nullptr && ctx.weight_loader->ReleasesWeights()) {
        regions.weights = true;
      } else if (ctx.weight_loader != nullptr) {
        static std::once_flag warned;
        std::call_once(warned, [] {
          RADIX_LOG_WARN(
              "memory occupation: the weights stay loaded; start the server with "
              "--enable-memory-saver to release them.");
        });
      }
    } else if (tag == "cuda_graph") {
      static std::once_flag warned;
      std::call_once(warned, [] {
        RADIX_LOG_WARN(
            "memory occupation: tag cuda_graph has nothing to release on cpu (no CUDA "
            "graphs).");
      });
    } else {
      return InvalidRequest("Unknown memory tag '" + tag +
                            "' (supported: kv_cache, weights, cuda_graph).");
    }
  }
  return regions;
}

// SGLang answers both routes with a JSON null on success.
void SendMemoryResult(ResponseWriter& writer, const Status& status) {
  if (!status.ok()) return SendResult(writer, BadRequest(status.message()));
  writer.Send(200, "application/json", "null");
}

}  // namespace

void HandleReleaseMemoryOccupation(ServerContext& ctx, const ApiRequest& request,
                                   ResponseWriterPtr writer) {
  ApiExpected<engine::MemoryRegions> regions = ReadMemoryTags(ctx, request);
  if (!regions.ok()) return SendResult(*writer, regions.status());
  // On the admin queue, so a release and a resume (which reads the checkpoint there) never
  // overlap.
  PostOrRun(ctx.admin_queue, [&ctx, writer, regions = *regions] {
    ctx.engine->ReleaseMemoryAsync(regions, [&ctx, writer, regions](Status status) {
      // The engine dropped its model; the loader's (and the LoRA registry's) reference go too,
      // which frees the weights. The engine is idle while released, so this may take its time.
      if (status.ok() && regions.weights) ctx.weight_loader->Release();
      SendMemoryResult(*writer, status);
    });
  });
}

void HandleResumeMemoryOccupation(ServerContext& ctx, const ApiRequest& request,
                                  ResponseWriterPtr writer) {
  ApiExpected<engine::MemoryRegions> regions = ReadMemoryTags(ctx, request);
  if (!regions.ok()) return SendResult(*writer, regions.status());
  PostOrRun(ctx.admin_queue, [&ctx, writer, regions = *regions] {
    std::shared_ptr<const model::CausalLM> model;
    if (regions.weights && ctx.weight_loader->Current() == nullptr) {
      // The released weights are read again from the checkpoint they came from.
      Expected<std::shared_ptr<const model::CausalLM>> loaded = ctx.weight_loader->Reload();
      if (!loaded.ok()) {
        return SendMemoryResult(
            *writer, Status(loaded.status().code(),
                            "Failed to reload the weights: " + loaded.status().message()));
      }
      model = *loaded;
    }
    ctx.engine->ResumeMemoryAsync(regions, model, [&ctx, writer, model](Status status) {
      if (status.ok() && model != nullptr) {
        ctx.weight_loader->Restore(model);
      }
      SendMemoryResult(*writer, status);
    });
  });
}

void HandleConfigureLogging(ServerContext& ctx, const ApiRequest& request,
                            ResponseWriterPtr writer) {
  ApiExpected<json> body = ReadBody(request);
  if (!body.ok()) return SendResult(*writer, body);
  // SGLang's request dumps and log formats other than its text lines are not implemented here:
  // asking for them is an error rather than a silent no-op.
  for (const char* unsupported :
       {"log_requests_format", "dump_requests_folder", "dump_requests_threshold",
        "crash_dump_folder", "dump_requests_exclude_meta_keys"}) {
    if (body->contains(unsupported) && !(*body)[unsupported].is_null()) {
      return SendResult(*writer, BadRequest(std::string("configure_logging: '") + unsupported +
                                            "' is not supported by radixserve (request logs are "
                                            "text lines; the crash dump folder is set at startup "
                                            "with --crash-dump-folder)."));
    }
  }
  ApiExpected<std::optional<bool>> log_requests = Field(ReadOptionalBool(*body, "log_requests"));
  if (!log_requests.ok()) return SendResult(*writer, log_requests.status());
  ApiExpected<std::optional<int64_t>> level =
      Field(ReadOptionalInt(*body, "log_requests_level", 0, 3));
  if (!level.ok()) return SendResult(*writer, level.status());
  ApiExpected<std::optional<std::string>> log_level = Field(ReadOptionalString(*body, "log_level"));
  if (!log_level.ok()) return SendResult(*writer, log_level.status());
  if (log_level->has_value() && !SetLogLevel(**log_level)) {
    return SendResult(*writer, InvalidRequest("log_level must be one of debug, info, warning, "
                                              "error, critical; got '" +
                                              **log_level + "'."));
  }
  // The request log in force: on/off from log_requests, its level from log_requests_level (or
  // the current log's, else --log-requests-level).
  std::shared_ptr<const RequestLog> current = ctx.request_log.load();
  const bool enabled = log_requests->value_or(current != nullptr);
  if (!enabled) {
    ctx.request_log.store(nullptr);
  } else if (current == nullptr || level->has_value()) {
    const int64_t new_level = level->value_or(
        current != nullptr ? current->level() : ctx.args->GetInt(args::key::kLogRequestsLevel));
    ctx.request_log.store(std::make_shared<const RequestLog>(static_cast<int>(new_level)));
  }
  RADIX_LOG_INFO("configure_logging: request log {}{}", enabled ? "on" : "off",
                 log_level->has_value() ? ", log level " + **log_level : std::string());
  writer->Send(200, "text/plain", "");
}

void HandleSetInternalState(ServerContext& ctx, const ApiRequest& request,
                            ResponseWriterPtr writer) {
  ApiExpected<json> body = ParseJsonObjectBody(request.body);
  if (!body.ok()) return SendResult(*writer, body);
  auto knobs = body->find("server_args");
  if (knobs == body->end() || !knobs->is_object()) {
    return SendResult(*writer, InvalidRequest("Field 'server_args' is required (an object of "
                                              "numeric scheduler knobs)."));
  }
  for (const auto& [key, value] : knobs->items()) {
    if (!value.is_number() || value.is_boolean()) {
      return SendResult(*writer, InvalidRequest("server_args." + key + " must be a number."));
    }
  }
  // SGLang's settable knobs (pipeline micro-batch size, speculative accept thresholds, DSpark
  // budgets) belong to features this server does not run: as SGLang does for a knob it has no
  // handler for, the update is refused as a whole and each replica answers false.
  for (auto it = knobs->begin(); it != knobs->end(); ++it) {
    RADIX_LOG_WARN("Updating {} is not supported.", it.key());
  }
  const bool updated = knobs->empty();
  const size_t replicas = ctx.engine->ReplicaStats().size();
  SendResult(*writer, json(std::vector<bool>(replicas, updated)));
}

// SGLang answers these two with {"error": {"message": ...}} (its _create_error_response).
void HandleOpenSession(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer) {
  ApiExpected<json> body = ParseJsonObjectBody(request.body);
  if (!body.ok()) return SendResult(*writer, body);
  if (ctx.sessions == nullptr) {
    return SendResult(*writer, BadRequest("Sessions are not available on this server."),
                      ErrorStyle::kNative);
  }
  SessionOpenOptions options;
  ApiExpected<std::optional<int64_t>> capacity =
      Field(ReadOptionalInt(*body, "capacity_of_str_len", 0));
  if (!capacity.ok()) return SendResult(*writer, capacity.status());
  if (!capacity->has_value()) {
    return SendResult(*writer, InvalidRequest("Field 'capacity_of_str_len' is required."));
  }
  options.capacity_of_str_len = **capacity;
  ApiExpected<std::optional<std::string>> id = Field(ReadOptionalString(*body, "session_id"));
  if (!id.ok()) return SendResult(*writer, id.status());
  options.id = *id;
  ApiExpected<std::optional<bool>> streaming = Field(ReadOptionalBool(*body, "streaming"));
  if (!streaming.ok()) return SendResult(*writer, streaming.status());
  options.streaming = streaming->value_or(false);
  auto timeout = body->find("timeout");
  if (timeout != body->end() && !timeout->is_null()) {
    if (!timeout->is_number() || timeout->get<double>() < 0) {
      return SendResult(*writer, InvalidRequest("timeout must be a non-negative number."));
    }
    options.timeout_s = timeout->get<double>();
  }
  Expected<std::string> opened = ctx.sessions->Open(options);
  if (!opened.ok()) {
    return SendResult(*writer, BadRequest(opened.status().message()), ErrorStyle::kNative);
  }
  SendResult(*writer, json(*opened));
}

void HandleCloseSession(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer) {
  ApiExpected<json> body = ParseJsonObjectBody(request.body);
  if (!body.ok()) return SendResult(*writer, body);
  ApiExpected<std::optional<std::string>> id = Field(ReadOptionalString(*body, "session_id"));
  if (!id.ok()) return SendResult(*writer, id.status());
  if (!id->has_value())
    return SendResult(*writer, InvalidRequest("Field 'session_id' is required."));
  if (ctx.sessions != nullptr) {
    for (const std::string& rid : ctx.sessions->Close(**id)) {
      ctx.engine->Abort(rid, engine::AbortMatch::kExactRid);
    }
  }
  writer->Send(200, "text/plain", "");
}

}  // namespace radixserve::api

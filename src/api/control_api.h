// SGLang's control-plane routes that apply on CPU: /pause_generation, /continue_generation,
// /update_weight_version, /configure_logging, /start_profile, /stop_profile, /set_internal_state
// (administrative: --admin-api-key when set, see routes.cpp), and /open_session, /close_session
// (session_store.h).
#pragma once

#include "api/routes.h"

namespace radixserve::api {

void HandlePauseGeneration(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
void HandleContinueGeneration(ServerContext& ctx, const ApiRequest& request,
                              ResponseWriterPtr writer);
void HandleUpdateWeightVersion(ServerContext& ctx, const ApiRequest& request,
                               ResponseWriterPtr writer);
// POST /update_weights_from_disk: SGLang's UpdateWeightFromDiskReqInput. Loads model_path (same
// architecture and shapes) on the admin queue, then the engine drains its running requests,
// swaps the model and flushes the prefix cache (flush_cache); answers {"success", "message",
// "num_paused_requests"} (400 with success false on failure). keep_pause pauses generation
// afterwards; abort_all_requests aborts everything first; weight_version is set on success.
// token_step, manifest and is_async are refused; the CUDA-only flags log a warning.
void HandleUpdateWeightsFromDisk(ServerContext& ctx, const ApiRequest& request,
                                 ResponseWriterPtr writer);
// GET or POST /get_weights_by_name: SGLang's {"name", "truncate_size": 100} -> the first
// truncate_size rows (a vector: values) of the parameter HF names `name`, in HF's layout; 400
// "Get parameter by name failed: ..." for an unknown name.
void HandleGetWeightsByName(ServerContext& ctx, const ApiRequest& request,
                            ResponseWriterPtr writer);
// GET or POST /release_memory_occupation and /resume_memory_occupation: SGLang's
// {"tags": [...]} ("kv_cache", "weights", "cuda_graph"; none: all). Release needs an idle server
// (a paused one may hold queued requests): kv_cache flushes the prefix cache and gives the KV
// pool's pages back to the OS; weights (with --enable-memory-saver) drops the model. No step runs
// until every released region is resumed; resuming the weights reads the served checkpoint again.
// Answers a JSON null, or 400 with why not.
void HandleReleaseMemoryOccupation(ServerContext& ctx, const ApiRequest& request,
                                   ResponseWriterPtr writer);
void HandleResumeMemoryOccupation(ServerContext& ctx, const ApiRequest& request,
                                  ResponseWriterPtr writer);
void HandleConfigureLogging(ServerContext& ctx, const ApiRequest& request,
                            ResponseWriterPtr writer);
void HandleStartProfile(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
void HandleStopProfile(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
// /start_expert_distribution_record, /stop_..., /dump_... (engine/expert_recorder.h): SGLang's
// plain-text answers; the dump is written as JSON into $SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR
// (default /tmp) off the I/O and engine threads. 400 when the server records none.
void HandleStartExpertRecord(ServerContext& ctx, const ApiRequest& request,
                             ResponseWriterPtr writer);
void HandleStopExpertRecord(ServerContext& ctx, const ApiRequest& request,
                            ResponseWriterPtr writer);
void HandleDumpExpertRecord(ServerContext& ctx, const ApiRequest& request,
                            ResponseWriterPtr writer);
void HandleSetInternalState(ServerContext& ctx, const ApiRequest& request,
                            ResponseWriterPtr writer);
void HandleOpenSession(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);
void HandleCloseSession(ServerContext& ctx, const ApiRequest& request, ResponseWriterPtr writer);

}  // namespace radixserve::api

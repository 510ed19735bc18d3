#include "args/validate.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string_view>

#include <fmt/format.h>

#include "args/arg_table.h"

namespace radixserve::args {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// --speculative-num-steps at most: each drafting sequence holds this many scratch KV rows.
constexpr int64_t kMaxSpeculativeSteps = 32;

Status Invalid(ArgKey arg, const std::string& message) {
  return InvalidArgument(fmt::format("argument --{}: {}", arg.name(), message));
}

// SGLang's deprecated MoE switches and the value each one stands for.
struct DeprecatedSwitch {
  ArgKey flag;
  ArgKey target;
  std::string_view value;
};
constexpr DeprecatedSwitch kDeprecatedSwitches[] = {
    {key::kEnableDeepepMoe, key::kMoeA2aBackend, "deepep"},
    {key::kEnableTritonKernelMoe, key::kMoeRunnerBackend, "triton_kernel"},
    {key::kEnableFlashinferCutlassMoe, key::kMoeRunnerBackend, "flashinfer_cutlass"},
    {key::kEnableFlashinferTrtllmMoe, key::kMoeRunnerBackend, "flashinfer_trtllm"},
    {key::kEnableFlashinferMxfp4Moe, key::kMoeRunnerBackend, "flashinfer_mxfp4"},
    {key::kEnableFlashinferCutedslMoe, key::kMoeRunnerBackend, "flashinfer_cutedsl"},
};

bool IsGgufFile(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) return true;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

void MapDeprecated(ServerArgs& args, std::vector<std::string>& warnings) {
  if (args.GetBool(key::kEnableEpMoe)) {
    args.Set(key::kEpSize, args.Get(key::kTpSize));
    warnings.push_back("--enable-ep-moe is deprecated; --ep-size is set to --tp-size instead");
  }
  for (const DeprecatedSwitch& item : kDeprecatedSwitches) {
    if (!args.GetBool(item.flag)) continue;
    args.Set(item.target, std::string(item.value));
    warnings.push_back(fmt::format("--{} is deprecated; use --{} {} instead", item.flag.name(),
                                   item.target.name(), item.value));
  }
}

// STANDALONE: a draft model proposing one chain (top-k 1) of --speculative-num-steps tokens.
// NEXTN: the same chain from the target checkpoint's own multi-token-prediction block
// (DeepSeek-V3's NextN layer), so there is no separate draft model. SGLang's defaults (3 steps,
// top-k 1, 4 draft tokens) fill what is unset; with top-k 1 the draft token count is steps + 1,
// adjusted with a warning as SGLang does.
Status ResolveDraftChainArgs(ServerArgs& args, std::vector<std::string>& warnings) {
  const std::string algorithm = args.GetString(key::kSpeculativeAlgorithm);
  if (algorithm == "STANDALONE" && args.IsNull(key::kSpeculativeDraftModelPath)) {
    return Invalid(key::kSpeculativeDraftModelPath,
                   "--speculative-algorithm STANDALONE needs a draft model");
  }
  if (algorithm == "NEXTN" && !args.IsNull(key::kSpeculativeDraftModelPath) &&
      args.GetString(key::kSpeculativeDraftModelPath) != args.GetString(key::kModelPath)) {
    return Invalid(key::kSpeculativeDraftModelPath,
                   "NEXTN drafts with the multi-token-prediction block of --model-path itself; a "
                   "separate NextN checkpoint is not read (leave this unset)");
  }
  if (!args.IsNull(key::kSpeculativeEagleTopk) && args.GetInt(key::kSpeculativeEagleTopk) != 1) {
    return Invalid(key::kSpeculativeEagleTopk,
                   "the draft model proposes a single chain (top-k 1); tree drafts are not "
                   "implemented");
  }
  args.Set(key::kSpeculativeEagleTopk, int64_t{1});
  if (args.IsNull(key::kSpeculativeNumSteps)) {
    const int64_t steps = args.IsNull(key::kSpeculativeNumDraftTokens)
                              ? 3
                              : args.GetInt(key::kSpeculativeNumDraftTokens) - 1;
    args.Set(key::kSpeculativeNumSteps, steps);
  }
  const int64_t steps = args.GetInt(key::kSpeculativeNumSteps);
  if (steps < 1 || steps > kMaxSpeculativeSteps) {
    return Invalid(key::kSpeculativeNumSteps,
                   fmt::format("must be between 1 and {}", kMaxSpeculativeSteps));
  }
  if (!args.IsNull(key::kSpeculativeNumDraftTokens) &&
      args.GetInt(key::kSpeculativeNumDraftTokens) != steps + 1) {
    warnings.push_back(fmt::format(
        "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 = {} when "
        "speculative_eagle_topk == 1",
        steps + 1));
  }
  args.Set(key::kSpeculativeNumDraftTokens, steps + 1);
  return Status::Ok();
}

// RTP-LLM's and LightLLM's speculative arguments, onto SGLang's. RTP-LLM's --sp-type
// deterministic is prompt lookup: NGRAM matching --sp-min/max-token-match tokens and drafting
// --gen-num-per-cycle tokens; vanilla is a small draft model: STANDALONE when a draft model is
// named (--speculative-draft-model-path), else off; mtp is the checkpoint's multi-token-prediction
// block, NEXTN drafting --gen-num-per-cycle tokens. LightLLM's --mtp-mode deepseekv3 is NEXTN too
// (--mtp_step is --speculative-num-steps). eagle / eagle3 need trained draft heads.
Status MapOtherSpeculativeArgs(ServerArgs& args, std::vector<std::string>& warnings) {
  if (!args.IsNull(key::kMtpMode)) {
    if (!args.IsNull(key::kSpeculativeAlgorithm)) {
      return Invalid(key::kMtpMode, "give either --mtp-mode or --speculative-algorithm, not both");
    }
    args.Set(key::kSpeculativeAlgorithm, std::string("NEXTN"));
    warnings.push_back(fmt::format("--mtp-mode {} runs as --speculative-algorithm NEXTN",
                                   args.GetString(key::kMtpMode)));
  }
  const std::string sp_type = args.GetString(key::kSpType);
  if (sp_type.empty()) return Status::Ok();
  if (sp_type != "deterministic" && sp_type != "vanilla" && sp_type != "mtp") {
    return Invalid(key::kSpType,
                   fmt::format("'{}' needs trained EAGLE draft heads, which radixserve does not "
                               "run; use vanilla (a draft model), mtp (the checkpoint's "
                               "multi-token-prediction block) or deterministic (prompt lookup)",
                               sp_type));
  }
  if (!args.IsNull(key::kSpeculativeAlgorithm)) {
    return Invalid(key::kSpType, "give either --sp-type or --speculative-algorithm, not both");
  }
  const int64_t per_cycle = args.GetInt(key::kGenNumPerCycle);
  if (per_cycle < 1) return Invalid(key::kGenNumPerCycle, "must be at least 1");
  if (sp_type == "deterministic") {
    args.Set(key::kSpeculativeAlgorithm, std::string("NGRAM"));
    args.Set(key::kSpeculativeNgramMinMatchWindowSize, args.GetInt(key::kSpMinTokenMatch));
    args.Set(key::kSpeculativeNgramMaxMatchWindowSize, args.GetInt(key::kSpMaxTokenMatch));
    args.Set(key::kSpeculativeNumDraftTokens, per_cycle + 1);
    warnings.push_back(fmt::format(
        "--sp-type deterministic runs as --speculative-algorithm NGRAM "
        "--speculative-ngram-min-match-window-size {} --speculative-ngram-max-match-window-size "
        "{} --speculative-num-draft-tokens {}",
        args.GetInt(key::kSpMinTokenMatch), args.GetInt(key::kSpMaxTokenMatch), per_cycle + 1));
  } else if (sp_type == "mtp") {
    args.Set(key::kSpeculativeAlgorithm, std::string("NEXTN"));
    args.Set(key::kSpeculativeNumSteps, per_cycle);
    warnings.push_back(fmt::format(
        "--sp-type mtp runs as --speculative-algorithm NEXTN --speculative-num-steps {}",
        per_cycle));
  } else if (!args.IsNull(key::kSpeculativeDraftModelPath)) {
    args.Set(key::kSpeculativeAlgorithm, std::string("STANDALONE"));
    args.Set(key::kSpeculativeNumSteps, per_cycle);
    warnings.push_back(fmt::format(
        "--sp-type vanilla runs as --speculative-algorithm STANDALONE --speculative-num-steps {}",
        per_cycle));
  }
  return Status::Ok();
}

// Speculative decoding: NGRAM (tree drafts from the n-gram table), STANDALONE (a draft model) and
// NEXTN (the checkpoint's multi-token-prediction block); EAGLE / EAGLE3 need trained draft heads.
Status ResolveSpeculativeArgs(ServerArgs& args, std::vector<std::string>& warnings) {
  const std::string algorithm = args.GetString(key::kSpeculativeAlgorithm);
  if (args.GetInt(key::kSpeculativeDisableByBatchSize) < 0) {
    return Invalid(key::kSpeculativeDisableByBatchSize, "must be >= 0 (0: never disabled)");
  }
  if (algorithm == "STANDALONE" || algorithm == "NEXTN") {
    return ResolveDraftChainArgs(args, warnings);
  }
  if (algorithm != "NGRAM") {
    return Invalid(key::kSpeculativeAlgorithm,
                   fmt::format("{} needs trained EAGLE draft heads, which radixserve does not "
                               "run; use NEXTN on a checkpoint with multi-token-prediction layers "
                               "(DeepSeek-V3), STANDALONE with a small draft model of the same "
                               "tokenizer, or NGRAM",
                               algorithm));
  }
  for (ArgKey draft_only :
       {key::kSpeculativeDraftModelPath, key::kSpeculativeNumSteps, key::kSpeculativeEagleTopk}) {
    if (!args.IsNull(draft_only)) {
      return Invalid(draft_only,
                     "applies to --speculative-algorithm STANDALONE, not NGRAM "
                     "(NGRAM's draft length is --speculative-num-draft-tokens)");
    }
  }
  const int64_t min_breadth = args.GetInt(key::kSpeculativeNgramMinBfsBreadth);
  if (min_breadth < 1) return Invalid(key::kSpeculativeNgramMinBfsBreadth, "must be >= 1");
  if (args.GetInt(key::kSpeculativeNgramMaxBfsBreadth) < min_breadth) {
    return Invalid(key::kSpeculativeNgramMaxBfsBreadth,
                   "must be >= --speculative-ngram-min-bfs-breadth");
  }
  if (!args.IsNull(key::kSpeculativeNumDraftTokens) &&
      args.GetInt(key::kSpeculativeNumDraftTokens) < 2) {
    return Invalid(key::kSpeculativeNumDraftTokens,
                   "must be at least 2 (the last sampled token and one draft)");
  }
  const int64_t min_window = args.GetInt(key::kSpeculativeNgramMinMatchWindowSize);
  if (min_window < 1) return Invalid(key::kSpeculativeNgramMinMatchWindowSize, "must be >= 1");
  if (args.GetInt(key::kSpeculativeNgramMaxMatchWindowSize) < min_window) {
    return Invalid(key::kSpeculativeNgramMaxMatchWindowSize,
                   "must be >= --speculative-ngram-min-match-window-size");
  }
  if (args.GetInt(key::kSpeculativeNgramBranchLength) < 2) {
    return Invalid(key::kSpeculativeNgramBranchLength, "must be at least 2");
  }
  if (args.GetInt(key::kSpeculativeNgramCapacity) < 1) {
    return Invalid(key::kSpeculativeNgramCapacity, "must be at least 1");
  }
  return Status::Ok();
}

// The expert-parallel load balancer's settings (model/expert_placement.h), given --ep-size `ep`.
Status ValidateExpertPlacement(const ServerArgs& args, int64_t ep) {
  if (args.GetInt(key::kEpNumRedundantExperts) < 0) {
    return Invalid(key::kEpNumRedundantExperts, "must be at least 0");
  }
  if (args.GetBool(key::kEnableEplb) && ep < 2) {
    return Invalid(key::kEnableEplb,
                   "needs --ep-size > 1: with one expert block there is nothing to balance");
  }
  if (args.GetInt(key::kEplbRebalanceNumIterations) < 1) {
    return Invalid(key::kEplbRebalanceNumIterations, "must be at least 1");
  }
  if (args.GetOptionalInt(key::kEplbRebalanceLayersPerChunk).value_or(1) < 1) {
    return Invalid(key::kEplbRebalanceLayersPerChunk, "must be at least 1");
  }
  if (const double u = args.GetFloat(key::kEplbMinRebalancingUtilizationThreshold);
      !(u >= 0.0 && u <= 1.0)) {
    return Invalid(key::kEplbMinRebalancingUtilizationThreshold, "must be in [0.0, 1.0]");
  }
  const std::string dispatch = args.GetOptionalString(key::kEpDispatchAlgorithm).value_or("static");
  if (dispatch != "static" && args.GetInt(key::kDpSize) > 1) {
    return Invalid(key::kEpDispatchAlgorithm,
                   dispatch +
                       " draws from each MoE layer's pass counter, which --dp-size replicas "
                       "sharing one model cannot share; use static");
  }
  // SGLang's DeepSeek algorithm in its global form; the hierarchical form first packs expert
  // groups onto nodes, which on one node changes nothing but the order among equal loads.
  const std::string algorithm = args.GetString(key::kEplbAlgorithm);
  const bool hierarchical = algorithm.ends_with("_hierarchical");
  if (hierarchical && args.GetInt(key::kNnodes) > 1) {
    return Invalid(key::kEplbAlgorithm,
                   algorithm +
                       " packs expert groups onto nodes, which is not implemented for "
                       "--nnodes > 1; use deepseek (or auto)");
  }
  if (algorithm == "elasticity_aware") {
    return Invalid(key::kEplbAlgorithm,
                   "elasticity_aware places experts around failed ranks of SGLang's elastic EP, "
                   "which radixserve does not have; use deepseek (or auto)");
  }
  return Status::Ok();
}

// --tp-size, --pp-size, --nnodes, --node-rank, --dist-init-addr (src/main/tensor_parallel.h): the
// layouts the ranks can take, and the features whose state lives outside the forward pass
// (adapters, the disk tier, replicas sharing the model) refused with more than one rank.
Status ValidateTensorParallel(const ServerArgs& args) {
  const int64_t tp = ModelSplitRanks(args), pp = args.GetInt(key::kPpSize);
  const int64_t ranks = tp * pp, nnodes = args.GetInt(key::kNnodes);
  if (args.GetInt(key::kNodeRank) >= nnodes) {
    return Invalid(key::kNodeRank, fmt::format("must be below --nnodes {}", nnodes));
  }
  if (nnodes > 1 && args.IsNull(key::kDistInitAddr)) {
    return Invalid(key::kDistInitAddr,
                   "is required with --nnodes > 1: host:port of node 0, where the ranks meet");
  }
  if (!args.IsNull(key::kMaxMicroBatchSize) && args.GetInt(key::kMaxMicroBatchSize) < 1) {
    return Invalid(key::kMaxMicroBatchSize, "must be at least 1");
  }
  // Expert parallelism splits the experts over blocks of the tensor-parallel ranks.
  if (const int64_t ep = args.GetInt(key::kEpSize); ep < 1 || tp % ep != 0) {
    return Invalid(key::kEpSize, fmt::format("must divide --tp-size {} (the experts are split "
                                             "over blocks of the tensor-parallel ranks)",
                                             tp));
  }
  RADIX_RETURN_IF_ERROR(ValidateExpertPlacement(args, args.GetInt(key::kEpSize)));
  if (args.GetOptionalString(key::kExpertDistributionRecorderMode).value_or("") == "stat_approx") {
    return Invalid(key::kExpertDistributionRecorderMode,
                   "stat_approx counts DeepEP's dispatch, a GPU path; use stat, per_pass or "
                   "per_token");
  }
  const bool recording = !args.IsNull(key::kExpertDistributionRecorderMode) ||
                         args.GetBool(key::kEnableExpertDistributionMetrics);
  if (recording && pp > 1) {
    return Invalid(
        key::kExpertDistributionRecorderMode,
        "is supported with --pp-size 1 only (the leader routes only its stage's layers)");
  }
  if (ranks == 1) return Status::Ok();
  if (ranks % nnodes != 0) {
    return Invalid(key::kNnodes,
                   fmt::format("must divide the {} ranks (tp-size x pp-size)", ranks));
  }
  const std::string only = pp > 1 ? "--pp-size 1" : "--tp-size 1";
  if (args.GetInt(key::kDpSize) > 1) {
    return Invalid(key::kDpSize,
                   "replicas in one process cannot be combined with --tp-size or --pp-size > 1; "
                   "run several servers behind sglang-router instead (docs/scaling.md)");
  }
  if (args.GetBool(key::kEnableHierarchicalCache)) {
    return Invalid(key::kEnableHierarchicalCache, "is supported with " + only + " only");
  }
  const nlohmann::json& lora = args.Get(key::kEnableLora);
  if ((lora.is_boolean() && lora.get<bool>()) || !args.IsNull(key::kLoraPaths)) {
    return Invalid(key::kEnableLora, "LoRA adapters are supported with " + only + " only");
  }
  if (args.GetBool(key::kEnableMemorySaver)) {
    return Invalid(key::kEnableMemorySaver, "is supported with " + only + " only");
  }
  if (!args.IsNull(key::kQuantizationParamPath)) {
    return Invalid(key::kQuantizationParamPath, "is supported with " + only + " only");
  }
  return Status::Ok();
}

// Prefill/decode disaggregation: radixserve's TCP transfer moves whole K/V rows between
// single-rank servers; a decode server receives them into its radix cache.
Status ValidateDisaggregation(const ServerArgs& args, std::vector<std::string>& warnings) {
  const std::string mode = args.GetString(key::kDisaggregationMode);
  if (mode == "null") return Status::Ok();
  if (ModelSplitRanks(args) * args.GetInt(key::kPpSize) > 1) {
    return Invalid(key::kDisaggregationMode,
                   "is supported with --tp-size 1 and --pp-size 1 only (the transfer moves whole "
                   "K/V rows between single-rank servers)");
  }
  for (const ArgKey peer : {key::kDisaggregationDecodeTp, key::kDisaggregationPrefillPp}) {
    if (!args.IsNull(peer) && args.GetInt(peer) != 1) {
      return Invalid(peer, "must be 1: radixserve's prefill and decode servers run one rank each");
    }
  }
  if (mode == "decode" && args.GetBool(key::kDisableRadixCache)) {
    return Invalid(key::kDisaggregationMode,
                   "decode puts the prefill server's K/V into the radix cache; drop "
                   "--disable-radix-cache");
  }
  const int64_t port = args.GetInt(key::kDisaggregationBootstrapPort);
  if (port < 1 || port > 65535) return Invalid(key::kDisaggregationBootstrapPort, "must be a port");
  const std::string backend = args.GetString(key::kDisaggregationTransferBackend);
  if (backend != "tcp") {
    warnings.push_back(fmt::format(
        "--disaggregation-transfer-backend {}: radixserve moves K/V over its own TCP transfer "
        "(port --disaggregation-bootstrap-port {} on the prefill server)",
        backend, args.GetInt(key::kDisaggregationBootstrapPort)));
  }
  return Status::Ok();
}

// The hierarchical cache (ResolveServerArgs already refused it without the radix cache): a
// storage tier needs the flag; the file backend is the one radixserve has; the extra config holds
// known keys of the right types only.
Status ValidateHiCache(const ServerArgs& args, std::vector<std::string>& warnings) {
  const bool enabled = args.GetBool(key::kEnableHierarchicalCache);
  const bool storage = !args.IsNull(key::kHicacheStorageBackend);
  if (storage && !enabled) {
    return Invalid(key::kHicacheStorageBackend, "requires --enable-hierarchical-cache");
  }
  if (storage && args.GetString(key::kHicacheStorageBackend) != "file") {
    return Invalid(key::kHicacheStorageBackend,
                   fmt::format("'{}' is a distributed store radixserve does not link; the 'file' "
                               "backend is available",
                               args.GetString(key::kHicacheStorageBackend)));
  }
  if (enabled && !storage) {
    warnings.push_back(
        "--enable-hierarchical-cache without --hicache-storage-backend: on device cpu the KV pool "
        "is host memory already, so there is no second tier; add --hicache-storage-backend file "
        "for the disk tier");
  }
  if (args.GetFloat(key::kHicacheRatio) <= 0) {
    return Invalid(key::kHicacheRatio, "must be positive");
  }
  if (args.GetInt(key::kHicacheSize) < 0) return Invalid(key::kHicacheSize, "must be >= 0");
  if (args.IsNull(key::kHicacheStorageBackendExtraConfig)) return Status::Ok();
  if (!storage) {
    return Invalid(key::kHicacheStorageBackendExtraConfig,
                   "configures the storage tier; give --hicache-storage-backend too");
  }
  const nlohmann::json& extra = args.Get(key::kHicacheStorageBackendExtraConfig);
  if (!extra.is_object()) {
    return Invalid(key::kHicacheStorageBackendExtraConfig, "must be a JSON object");
  }
  for (const auto& [name, value] : extra.items()) {
    if (name == "prefetch_threshold") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0) {
        return Invalid(key::kHicacheStorageBackendExtraConfig,
                       "prefetch_threshold must be an integer >= 0");
      }
    } else if (name == "prefetch_timeout_base" || name == "prefetch_timeout_per_ki_token") {
      if (!value.is_number() || value.get<double>() < 0) {
        return Invalid(key::kHicacheStorageBackendExtraConfig, name + " must be a number >= 0");
      }
    } else {
      return Invalid(key::kHicacheStorageBackendExtraConfig,
                     fmt::format("unknown key '{}' (the file backend reads prefetch_threshold, "
                                 "prefetch_timeout_base and prefetch_timeout_per_ki_token)",
                                 name));
    }
  }
  return Status::Ok();
}

// Device-only arguments: accepted, with one warning each when set to a non-default value.
void WarnInapplicable(const ServerArgs& args, std::vector<std::string>& warnings) {
  for (const ArgSpec& spec : AllArgs()) {
    if (spec.cpu != Support::kNo || !args.IsExplicit(KeyOf(spec))) continue;
    if (args.Get(KeyOf(spec)) == nlohmann::json::parse(spec.default_value)) continue;
    warnings.push_back(fmt::format("--{} has no effect on device cpu: {}", spec.name,
                                   spec.cpu_note.empty() ? "not applicable" : spec.cpu_note));
  }
}

// Partially supported arguments set to a value that does not apply on cpu: one warning each.
void WarnInapplicableValues(const ServerArgs& args, std::vector<std::string>& warnings) {
  for (const ArgSpec& spec : AllArgs()) {
    if (spec.cpu != Support::kPartial || spec.cpu_values.empty()) continue;
    if (!args.IsExplicit(KeyOf(spec)) || args.IsNull(KeyOf(spec))) continue;
    const nlohmann::json& value = args.Get(KeyOf(spec));
    const std::string spelled = value.is_string() ? value.get<std::string>() : value.dump();
    bool applies = false;
    for (std::string_view allowed : spec.cpu_values) applies = applies || allowed == spelled;
    if (applies) continue;
    warnings.push_back(fmt::format("--{} {} does not apply on device cpu and is ignored: {}",
                                   spec.name, spelled, spec.cpu_note));
  }
}

// LightLLM's --mode: its int8kv modes store the KV cache as int8 with per-token, per-head scales
// (--kv-cache-dtype int8 here), triton_fp8kv as fp8 (fp8_e4m3); the others pick GPU attention
// kernels and log one warning each. A --kv-cache-dtype given as well must agree.
Status ApplyLightLlmModes(ServerArgs& args, std::vector<std::string>& warnings) {
  if (args.IsNull(key::kMode)) return Status::Ok();
  std::string kv_dtype;
  for (const nlohmann::json& item : args.Get(key::kMode)) {
    const std::string mode = item.get<std::string>();
    std::string dtype;
    if (mode == "triton_int8kv" || mode == "ppl_int8kv") dtype = "int8";
    if (mode == "triton_fp8kv") dtype = "fp8_e4m3";
    if (dtype.empty()) {
      warnings.push_back(fmt::format(
          "--mode {} selects a GPU attention kernel and is ignored on device cpu", mode));
      continue;
    }
    if (!kv_dtype.empty() && kv_dtype != dtype) {
      return InvalidArgument(
          fmt::format("--mode: {} asks for a {} KV cache, but another mode asks for {}", mode,
                      dtype, kv_dtype));
    }
    kv_dtype = dtype;
  }
  if (kv_dtype.empty()) return Status::Ok();
  if (args.IsExplicit(key::kKvCacheDtype) && args.GetString(key::kKvCacheDtype) != kv_dtype) {
    return InvalidArgument(
        fmt::format("--mode asks for a {} KV cache but --kv-cache-dtype is {}: give one of them",
                    kv_dtype, args.GetString(key::kKvCacheDtype)));
  }
  args.Set(key::kKvCacheDtype, kv_dtype);
  return Status::Ok();
}

// Every --moe-runner-backend value runs on the one CPU expert GEMM: one line saying so.
void WarnMoeRunnerBackend(const ServerArgs& args, std::vector<std::string>& warnings) {
  const std::string backend = args.GetString(key::kMoeRunnerBackend);
  if (backend == "auto") return;
  warnings.push_back(fmt::format(
      "--moe-runner-backend {} maps to radixserve's CPU expert GEMM (model/moe_ffn.h: the step's "
      "tokens grouped by expert, one matmul per active expert and projection), as auto does",
      backend));
}

// SGLang sizes the activation reserve and the default chunk from device memory; on cpu the
// device memory is the RAM this process may use.
void DeriveMemoryDefaults(ServerArgs& args, const MachineInfo& machine) {
  const double mem_mb = static_cast<double>(machine.total_memory_bytes) / kMiB;
  const bool known = machine.total_memory_bytes != 0;
  // mem_fraction_static stays unset unless given: SGLang derives it from GPU memory minus an
  // activation reserve, but on cpu the KV pool shares RAM with every other process, so the
  // engine applies the cpu rule of kv/memory_sizing.h (a quarter of the available memory).
  if (args.IsNull(key::kChunkedPrefillSize)) {
    int64_t chunk = 4096;
    if (known) chunk = mem_mb < 35 * 1024 ? 2048 : mem_mb < 160 * 1024 ? 8192 : 16384;
    args.Set(key::kChunkedPrefillSize, chunk);
  }
}

Status CheckBuckets(const ServerArgs& args, ArgKey name) {
  const nlohmann::json& rule = args.Get(name);
  if (rule.is_null() || rule.empty()) return Status::Ok();
  std::vector<std::string> words;
  for (const auto& item : rule)
    words.push_back(item.is_string() ? item.get<std::string>() : item.dump());
  auto number = [](const std::string& word, double& out) {
    char* end = nullptr;
    out = std::strtod(word.c_str(), &end);
    return !word.empty() && end == word.c_str() + word.size();
  };
  const std::string& kind = words[0];
  if (kind == "default") {
    if (words.size() != 1) return Invalid(name, "the 'default' rule takes no values");
  } else if (kind == "tse") {
    double middle, base, count;
    if (words.size() != 4 || !number(words[1], middle) || !number(words[2], base) ||
        !number(words[3], count) || count != std::floor(count)) {
      return Invalid(name, "the 'tse' rule is: tse <middle> <base> <count>");
    }
    if (base <= 1) return Invalid(name, "tse base must be greater than 1");
    if (count <= 0) return Invalid(name, "tse count must be positive");
    if (middle <= 0) return Invalid(name, "tse middle must be positive");
  } else if (kind == "customer") {
    if (words.size() < 2) return Invalid(name, "the 'customer' rule needs at least one bucket");
    std::vector<double> values;
    for (size_t i = 1; i < words.size(); ++i) {
      double value;
      if (!number(words[i], value)) return Invalid(name, "customer buckets must be numbers");
      if (value < 0) return Invalid(name, "customer buckets must be non-negative");
      for (double seen : values) {
        if (seen == value) return Invalid(name, "customer buckets must not repeat");
      }
      values.push_back(value);
    }
  } else {
    return Invalid(name, fmt::format("unknown rule '{}' (choose from 'tse', 'default', "
                                     "'customer')",
                                     kind));
  }
  return Status::Ok();
}

Status CheckRanges(const ServerArgs& args) {
  struct MinRule {
    ArgKey key;
    int64_t min;
  };
  // Integer arguments that must be at least `min` when set.
  constexpr MinRule kMinimums[] = {
      {key::kPort, 1},
      {key::kTpSize, 1},
      {key::kPpSize, 1},
      {key::kDpSize, 1},
      {key::kNnodes, 1},
      {key::kNodeRank, 0},
      {key::kDistTimeout, 1},
      {key::kPageSize, 1},
      {key::kStreamInterval, 1},
      {key::kMaxQueuedRequests, 1},
      {key::kConcurrencyLimit, 1},
      {key::kMaxRunningRequests, 1},
      {key::kMaxTotalTokens, 1},
      {key::kMaxPrefillTokens, 1},
      {key::kTokenizerWorkerNum, 1},
      {key::kContextLength, 1},
      {key::kBaseGpuId, 0},
      {key::kGpuIdStep, 1},
      {key::kDecodeLogInterval, 1},
      {key::kNumContinuousDecodeSteps, 1},
      {key::kMaxLorasPerBatch, 1},
      {key::kThreads, 1},
      {key::kMaxN, 1},
      {key::kMaxRequestsPerCall, 1},
      {key::kMaxTopLogprobs, 0},
      {key::kMaxRequestBodyMb, 1},
      {key::kMaxBufferedBodyMb, 1},
  };
  for (const MinRule& rule : kMinimums) {
    auto value = args.GetOptionalInt(rule.key);
    if (value && *value < rule.min) {
      return Invalid(rule.key, fmt::format("must be >= {}, got {}", rule.min, *value));
    }
  }
  if (args.GetInt(key::kPort) > 65535) return Invalid(key::kPort, "must be <= 65535");
  if (args.GetInt(key::kMaxRequestBodyMb) > args.GetInt(key::kMaxBufferedBodyMb)) {
    return Invalid(key::kMaxRequestBodyMb, fmt::format("must be <= --max-buffered-body-mb ({})",
                                                       args.GetInt(key::kMaxBufferedBodyMb)));
  }
  if (args.GetInt(key::kMaxBufferedBodyMb) > (int64_t{1} << 30)) {
    return Invalid(key::kMaxBufferedBodyMb, "must be <= 1073741824");
  }
  if (args.GetFloat(key::kShutdownGracePeriod) < 0) {
    return Invalid(key::kShutdownGracePeriod, "must be >= 0");
  }
  if (!args.IsNull(key::kMemFractionStatic)) {
    double fraction = args.GetFloat(key::kMemFractionStatic);
    if (!(fraction > 0.0 && fraction < 1.0)) {
      return Invalid(key::kMemFractionStatic, fmt::format("must be in (0, 1), got {}", fraction));
    }
  }
  if (args.GetFloat(key::kScheduleConservativeness) < 0) {
    return Invalid(key::kScheduleConservativeness, "must be >= 0");
  }
  if (args.GetFloat(key::kWatchdogTimeout) <= 0) {
    return Invalid(key::kWatchdogTimeout, "must be > 0");
  }
  if (args.GetString(key::kServedModelName).find(':') != std::string::npos &&
      args.IsExplicit(key::kServedModelName)) {
    return Invalid(key::kServedModelName, "must not contain ':'");
  }
  return Status::Ok();
}

Status CheckCombinations(ServerArgs& args, std::vector<std::string>& warnings) {
  if (args.GetBool(key::kEnableHierarchicalCache) && args.GetBool(key::kDisableRadixCache)) {
    return Invalid(key::kEnableHierarchicalCache,
                   "cannot be combined with --disable-radix-cache (the hierarchical cache "
                   "extends the radix cache)");
  }
  if (args.GetBool(key::kEnableTokenizerBatchEncode) &&
      args.GetBool(key::kEnableDynamicBatchTokenizer)) {
    return Invalid(key::kEnableTokenizerBatchEncode,
                   "cannot be combined with --enable-dynamic-batch-tokenizer");
  }
  if (args.GetBool(key::kSkipTokenizerInit)) {
    args.Set(key::kTokenizerWorkerNum, 1);
    if (args.GetBool(key::kEnableTokenizerBatchEncode)) {
      args.Set(key::kEnableTokenizerBatchEncode, false);
      warnings.push_back("--enable-tokenizer-batch-encode is turned off by --skip-tokenizer-init");
    }
  }
  if (args.GetBool(key::kEnablePriorityScheduling)) {
    std::string policy = args.GetString(key::kSchedulePolicy);
    if (policy != "fcfs" && policy != "lof") {
      return Invalid(key::kEnablePriorityScheduling,
                     fmt::format("requires --schedule-policy fcfs or lof, got '{}'", policy));
    }
  }
  if (!args.IsNull(key::kMultiItemScoringDelimiter) &&
      (!args.GetBool(key::kDisableRadixCache) || args.GetInt(key::kChunkedPrefillSize) != -1)) {
    return Invalid(key::kMultiItemScoringDelimiter,
                   "requires --disable-radix-cache and --chunked-prefill-size -1");
  }
  if (!args.IsNull(key::kQuantizationParamPath)) {
    if (args.GetString(key::kKvCacheDtype) != "fp8_e4m3") {
      return Invalid(key::kQuantizationParamPath,
                     "holds FP8 E4M3 KV-cache scaling factors; it requires --kv-cache-dtype "
                     "fp8_e4m3");
    }
  }
  RADIX_RETURN_IF_ERROR(ValidateHiCache(args, warnings));
  const int64_t page_size = args.GetInt(key::kPageSize);
  const int64_t chunk = args.GetInt(key::kChunkedPrefillSize);
  if (chunk > 0 && chunk % page_size != 0) {
    return Invalid(key::kChunkedPrefillSize,
                   fmt::format("{} is not divisible by --page-size {}", chunk, page_size));
  }
  if ((args.GetInt(key::kTpSize) * args.GetInt(key::kPpSize)) % args.GetInt(key::kNnodes) != 0) {
    return Invalid(key::kNnodes, "tp-size x pp-size must be divisible by the number of nodes");
  }
  if (args.GetInt(key::kPpSize) > 1) {
    args.Set(key::kDisableOverlapSchedule, true);
    if (args.GetBool(key::kEnableMixedChunk) || !args.IsNull(key::kSpeculativeAlgorithm)) {
      return Invalid(key::kPpSize,
                     "pipeline parallelism cannot be combined with --enable-mixed-chunk or "
                     "speculative decoding");
    }
  }
  if (Status other = MapOtherSpeculativeArgs(args, warnings); !other.ok()) return other;
  if (!args.IsNull(key::kSpeculativeAlgorithm)) {
    if (Status spec = ResolveSpeculativeArgs(args, warnings); !spec.ok()) return spec;
    if (args.GetBool(key::kEnableMixedChunk)) {
      args.Set(key::kEnableMixedChunk, false);
      warnings.push_back(
          "--enable-mixed-chunk is turned off: speculative decoding needs whole "
          "prefill batches");
    }
  }
  if (args.GetInt(key::kDpSize) == 1 && args.GetBool(key::kEnableDpAttention)) {
    args.Set(key::kEnableDpAttention, false);
  }
  if (args.GetBool(key::kEnableDpAttention)) {
    const int64_t dp = args.GetInt(key::kDpSize);
    if (args.GetInt(key::kTpSize) % dp != 0) {
      return Invalid(key::kEnableDpAttention, "--tp-size must be divisible by --dp-size");
    }
    args.Set(key::kScheduleConservativeness, args.GetFloat(key::kScheduleConservativeness) * 0.3);
    args.Set(key::kChunkedPrefillSize, args.GetInt(key::kChunkedPrefillSize) / dp);
  }
  return ValidateTensorParallel(args);
}

}  // namespace

Status ResolveServerArgs(ServerArgs& args, const MachineInfo& machine,
                         std::vector<std::string>& warnings) {
  MapDeprecated(args, warnings);

  const std::string model_path = args.GetString(key::kModelPath);
  if (args.IsNull(key::kTokenizerPath)) args.Set(key::kTokenizerPath, model_path);
  if (args.IsNull(key::kServedModelName)) args.Set(key::kServedModelName, model_path);
  if (!args.IsNull(key::kRevision)) {
    return Invalid(key::kRevision,
                   "radixserve loads local files only and cannot fetch a revision from a model "
                   "hub; point --model-path at the checkout you want");
  }
  if (!args.IsNull(key::kSpeculativeDraftModelRevision)) {
    return Invalid(key::kSpeculativeDraftModelRevision,
                   "radixserve loads local files only and cannot fetch a revision from a model "
                   "hub; point --speculative-draft-model-path at the checkout you want");
  }

  std::string device = args.IsNull(key::kDevice) ? "auto" : args.GetString(key::kDevice);
  if (device != "cpu" && device != "auto") {
    return Invalid(key::kDevice, fmt::format("'{}' is not available: this build supports device "
                                             "'cpu' only",
                                             device));
  }
  args.Set(key::kDevice, "cpu");

  if (args.IsNull(key::kRandomSeed)) {
    std::random_device entropy;
    args.Set(key::kRandomSeed, static_cast<int64_t>(entropy() % ((1u << 30) + 1)));
  }
  if (args.IsNull(key::kPageSize)) args.Set(key::kPageSize, 1);
  // One grammar engine serves every backend name SGLang and LightLLM accept (except none).
  if (!args.IsNull(key::kGrammarBackend)) {
    const std::string backend = args.GetString(key::kGrammarBackend);
    if (backend == "xgrammar" || backend == "outlines") {
      warnings.push_back(fmt::format(
          "--grammar-backend {}: radixserve's grammar engine is llguidance, which enforces the "
          "same json_schema, regex, ebnf and structural_tag constraints",
          backend));
    }
  }
  if (args.IsNull(key::kGrammarBackend) || args.GetString(key::kGrammarBackend) != "none") {
    args.Set(key::kGrammarBackend, "llguidance");
  }
  if (args.IsNull(key::kThreads)) {
    args.Set(key::kThreads, static_cast<int64_t>(machine.usable_cpus));
  }

  // Kernel backends: on cpu SGLang picks intel_amx attention (torch_native without AMX) and the
  // pytorch sampler; radixserve runs its own kernels for every choice and says so once.
  if (args.IsNull(key::kAttentionBackend)) args.Set(key::kAttentionBackend, "torch_native");
  if (args.IsExplicit(key::kSamplingBackend) && !args.IsNull(key::kSamplingBackend) &&
      args.GetString(key::kSamplingBackend) != "pytorch") {
    warnings.push_back(fmt::format(
        "--sampling-backend {}: on device cpu every sampling backend is radixserve's own sampler",
        args.GetString(key::kSamplingBackend)));
  }
  args.Set(key::kSamplingBackend, "pytorch");

  if (!args.IsNull(key::kToolCallParser)) {
    std::string parser = args.GetString(key::kToolCallParser);
    std::string renamed = parser == "qwen25" ? "qwen" : parser == "glm45" ? "glm" : "";
    if (!renamed.empty()) {
      args.Set(key::kToolCallParser, renamed);
      warnings.push_back(
          fmt::format("--tool-call-parser {} is deprecated; using '{}'", parser, renamed));
    }
  }

  const std::string load_format = args.GetString(key::kLoadFormat);
  if ((load_format == "auto" || load_format == "gguf") && IsGgufFile(model_path)) {
    args.Set(key::kLoadFormat, "gguf");
    args.Set(key::kQuantization, "gguf");
  }

  // RTP-LLM's --max-batch-size (an alias) defaults to 0, meaning no limit of its own: the
  // derived default then applies, as when the argument is unset.
  if (!args.IsNull(key::kMaxRunningRequests) && args.GetInt(key::kMaxRunningRequests) == 0) {
    args.Set(key::kMaxRunningRequests, nlohmann::json());
  }
  // RTP-LLM's --reuse-cache given as false: no prefix reuse, SGLang's --disable-radix-cache. (Its
  // default is false, but left out the radix cache stays on: SGLang launch lines never name it.)
  if (args.IsExplicit(key::kReuseCache) && !args.GetBool(key::kReuseCache)) {
    args.Set(key::kDisableRadixCache, true);
  }
  RADIX_RETURN_IF_ERROR(ApplyLightLlmModes(args, warnings));
  DeriveMemoryDefaults(args, machine);
  RADIX_RETURN_IF_ERROR(CheckRanges(args));
  RADIX_RETURN_IF_ERROR(CheckCombinations(args, warnings));
  RADIX_RETURN_IF_ERROR(ValidateDisaggregation(args, warnings));
  if (!args.IsNull(key::kFirstTokenConstraintMode) &&
      args.GetBool(key::kFirstTokenConstraintMode)) {
    RADIX_RETURN_IF_ERROR(FirstAllowedTokens().status());
  }
  RADIX_RETURN_IF_ERROR(CheckBuckets(args, key::kPromptTokensBuckets));
  RADIX_RETURN_IF_ERROR(CheckBuckets(args, key::kGenerationTokensBuckets));
  WarnInapplicable(args, warnings);
  WarnInapplicableValues(args, warnings);
  WarnMoeRunnerBackend(args, warnings);
  return Status::Ok();
}

Expected<std::vector<int32_t>> FirstAllowedTokens() {
  const char* env = std::getenv("FIRST_ALLOWED_TOKENS");
  const std::string value = env != nullptr ? env : "";
  const auto bad = [&value] {
    return InvalidArgument(
        "--first_token_constraint_mode needs FIRST_ALLOWED_TOKENS in the environment: "
        "comma-separated token ids, got '" +
        value + "'.");
  };
  std::vector<int32_t> ids;
  std::string_view rest = value;
  while (!rest.empty() || ids.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    int32_t id = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || id < 0) {
      return bad();
    }
    ids.push_back(id);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return ids;
}

int64_t ModelSplitRanks(const ServerArgs& args) {
  const int64_t tp = args.GetInt(key::kTpSize);
  return args.GetBool(key::kEnableDpAttention) ? tp / args.GetInt(key::kDpSize) : tp;
}

}  // namespace radixserve::args

// Argument groups, in the order --help and docs/server_args.md list them. The SGLang groups follow
// SGLang's own server-argument reference; arguments that exist only in LightLLM or RTP-LLM and
// radixserve's own arguments get groups of their own.
#pragma once

#include <string_view>

namespace radixserve::args::group {

inline constexpr std::string_view kModel = "Model and tokenizer";
inline constexpr std::string_view kRemoteWeights = "Remote instance weight loading";
inline constexpr std::string_view kHttp = "HTTP server";
inline constexpr std::string_view kQuantization = "Quantization and data type";
inline constexpr std::string_view kMemory = "Memory and scheduling";
inline constexpr std::string_view kRuntime = "Runtime options";
inline constexpr std::string_view kLogging = "Logging";
inline constexpr std::string_view kApi = "API related";
inline constexpr std::string_view kDataParallel = "Data parallelism";
inline constexpr std::string_view kMultiNode = "Multi-node distributed serving";
inline constexpr std::string_view kModelOverride = "Model override args in JSON";
inline constexpr std::string_view kLora = "LoRA";
inline constexpr std::string_view kKernelBackend = "Kernel backend";
inline constexpr std::string_view kSpeculative = "Speculative decoding";
inline constexpr std::string_view kExpertParallel = "Expert parallelism";
inline constexpr std::string_view kMamba = "Mamba cache";
inline constexpr std::string_view kHierarchicalCache = "Hierarchical cache";
inline constexpr std::string_view kDoubleSparsity = "Double sparsity";
inline constexpr std::string_view kOffloading = "Offloading";
inline constexpr std::string_view kOptimization = "Optimization/debug options";
inline constexpr std::string_view kDynamicBatchTokenizer = "Dynamic batch tokenizer";
inline constexpr std::string_view kDebugTensorDumps = "Debug tensor dumps";
inline constexpr std::string_view kDisaggregation = "PD disaggregation";
inline constexpr std::string_view kWeightUpdate = "Model weight update";
inline constexpr std::string_view kPdMultiplexing = "PD-Multiplexing";
inline constexpr std::string_view kDeprecated = "Deprecated arguments";
inline constexpr std::string_view kLightllm = "LightLLM-specific";
inline constexpr std::string_view kRtpllm = "RTP-LLM-specific";
inline constexpr std::string_view kRadixserve = "radixserve";

// Display order.
inline constexpr std::string_view kOrder[] = {
    kModel,       kRemoteWeights,  kHttp,          kQuantization,
    kMemory,      kRuntime,        kLogging,       kApi,
    kDataParallel, kMultiNode,     kModelOverride, kLora,
    kKernelBackend, kSpeculative,  kExpertParallel, kMamba,
    kHierarchicalCache, kDoubleSparsity, kOffloading, kOptimization,
    kDynamicBatchTokenizer, kDebugTensorDumps, kDisaggregation, kWeightUpdate,
    kPdMultiplexing, kDeprecated,  kRadixserve,    kLightllm,
    kRtpllm,
};

}  // namespace radixserve::args::group

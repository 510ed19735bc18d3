// RTP-LLM's server arguments: the ones with a behaviour of their own (RtpllmArgs) and the RTP-LLM
// spellings of arguments SGLang already has (RtpllmAliases). RTP-LLM spellings that equal an
// SGLang name after dash/underscore folding (--tp-size, --ep-size, --dp-size, --log-level) need
// no entry here. Most RTP-LLM switches tune CUDA/ROCm kernels or cluster services; they are
// accepted so RTP-LLM command lines keep working, and warn once when set.
#include "args/arg_groups.h"
#include "args/arg_table.h"

namespace radixserve::args {

namespace {

constexpr std::string_view kGpuNote =
    "Tunes a GPU kernel or stream; no such thing on the cpu device.";
constexpr std::string_view kFmhaNote = "Selects a CUDA attention kernel; radixserve uses its own.";
constexpr std::string_view kMultiRankNote =
    "radixserve runs one process; its ranks follow --tp-size and --dp-size.";
constexpr std::string_view kExpertNote =
    "Expert parallelism needs several ranks; radixserve runs one.";
constexpr std::string_view kSpeculativeNote =
    "Speculative decoding is not implemented in radixserve yet.";
constexpr std::string_view kClusterNote =
    "Belongs to RTP-LLM's cluster services, which radixserve does not have.";
constexpr std::string_view kProfilingNote =
    "CUDA/RTP-LLM profiling hooks do not exist in radixserve.";

constexpr AliasSpec Rtpllm(std::string_view name) { return {name, System::kRtpllm}; }

// An RTP-LLM setting of the given type for a feature radixserve does not have.
ArgSpec Unsupported(std::string_view name, ArgType type, std::string_view default_value,
                    std::string_view help, std::string_view cpu_note) {
  return {.name = name,
          .type = type,
          .default_value = default_value,
          .group = group::kRtpllm,
          .help = help,
          .cpu = Support::kNo,
          .cpu_note = cpu_note,
          .system = System::kRtpllm};
}

// An RTP-LLM true/false switch for a feature radixserve does not have (GPU, cluster, debug).
ArgSpec UnsupportedSwitch(std::string_view name, std::string_view default_value,
                          std::string_view help, std::string_view cpu_note) {
  return Unsupported(name, ArgType::kBool, default_value, help, cpu_note);
}

}  // namespace

std::vector<ArgSpec> RtpllmArgs() {
  return {
      // Parallelism and distributed setup.
      Unsupported("world-size", ArgType::kInt, "null",
                  "Total number of GPUs of the deployment (tensor times data parallel size).",
                  kMultiRankNote),
      Unsupported("world-rank", ArgType::kInt, "null",
                  "Global index of this process among all ranks of the deployment.",
                  kMultiRankNote),
      Unsupported("local-world-size", ArgType::kInt, "null",
                  "Number of GPUs this node contributes.", kMultiRankNote),
      UnsupportedSwitch("enable-ffn-disaggregate", "null",
                        "Run attention and the feed-forward layers on separate groups of GPUs.",
                        kMultiRankNote),

      // Concurrency control.
      {.name = "concurrency-with-block",
       .type = ArgType::kBool,
       .default_value = "false",
       .group = group::kRtpllm,
       .help = "When --concurrency-limit is reached, make new requests wait for a free slot "
               "instead of rejecting them.",
       .cpu = Support::kNo,
       .cpu_note = "Not implemented yet: requests beyond the running batch queue (see --max-queued-requests).",
       .system = System::kRtpllm},
      {.name = "concurrency-limit",
       .type = ArgType::kInt,
       .default_value = "32",
       .group = group::kRtpllm,
       .help = "Most requests the server accepts at once, counting queued and running ones; "
               "unlike --max-running-requests (batch size) or --max-queued-requests (queue "
               "length) it bounds both together.",
       .cpu = Support::kNo,
       .cpu_note = "Not implemented yet: concurrency is bounded by --max-running-requests and --max-queued-requests.",
       .system = System::kRtpllm},

      // Attention kernels.
      UnsupportedSwitch("enable-fmha", "true", "Allow fused multi-head attention kernels.",
                        kFmhaNote),
      UnsupportedSwitch("enable-trt-fmha", "true", "Allow TensorRT-LLM's fused attention kernels.",
                        kFmhaNote),
      UnsupportedSwitch("enable-paged-trt-fmha", "true",
                        "Allow TensorRT-LLM's fused attention over a paged KV cache.", kFmhaNote),
      UnsupportedSwitch("enable-open-source-fmha", "true",
                        "Allow the open-source fused attention kernels.", kFmhaNote),
      UnsupportedSwitch("enable-paged-open-source-fmha", "true",
                        "Allow the open-source fused attention over a paged KV cache.", kFmhaNote),
      UnsupportedSwitch("enable-trtv1-fmha", "true",
                        "Allow the first-generation TensorRT fused attention kernels.", kFmhaNote),
      UnsupportedSwitch("fmha-perf-instrument", "false",
                        "Mark fused attention calls with NVTX ranges for profiling.",
                        kProfilingNote),
      UnsupportedSwitch("fmha-show-params", "false",
                        "Print the parameters each fused attention call is launched with.",
                        kProfilingNote),
      UnsupportedSwitch("disable-flash-infer", "false", "Do not use FlashInfer attention kernels.",
                        kFmhaNote),
      UnsupportedSwitch("enable-xqa", "true",
                        "Allow the XQA decode attention kernels (Hopper-class GPUs).", kFmhaNote),

      // KV cache.
      {.name = "reuse-cache",
       .type = ArgType::kBool,
       .default_value = "false",
       .group = group::kRtpllm,
       .help = "RTP-LLM's switch (off there by default) for reusing the KV cache of prompt "
               "prefixes that earlier requests computed. radixserve's radix cache does this and "
               "is on unless --disable-radix-cache is given.",
       .cpu = Support::kNo,
       .cpu_note = "Not read: prefix reuse is radixserve's radix cache, on unless --disable-radix-cache is given.",
       .system = System::kRtpllm},
      Unsupported("multi-task-prompt", ArgType::kString, "null",
                  "File of task prompts whose KV cache is computed at startup and kept for "
                  "requests that start with them.",
                  "Preloading prompts into the cache at startup is not implemented."),
      Unsupported("multi-task-prompt-str", ArgType::kJson, "null",
                  "The same task prompts as --multi-task-prompt, given inline as JSON.",
                  "Preloading prompts into the cache at startup is not implemented."),

      // Hardware and kernel tuning.
      Unsupported("deep-gemm-num-sm", ArgType::kInt, "null",
                  "Number of streaming multiprocessors DeepGEMM may use.", kGpuNote),
      UnsupportedSwitch("arm-gemm-use-kai", "false",
                        "Use Arm's KleidiAI micro-kernels for matrix multiplication on Arm CPUs.",
                        "radixserve targets x86-64 CPUs and uses its own kernels."),
      UnsupportedSwitch("enable-stable-scatter-add", "false",
                        "Use a deterministic (order-preserving) scatter-add kernel.", kGpuNote),
      UnsupportedSwitch(
          "enable-multi-block-mode", "true",
          "Let masked multi-head attention split long sequences across thread blocks.", kGpuNote),
      Unsupported("rocm-hipblaslt-config", ArgType::kString, "\"gemm_config.csv\"",
                  "CSV file with tuned hipBLASLt GEMM settings for AMD GPUs.",
                  "ROCm does not apply on the cpu device."),

      // Device resources.
      Unsupported("device-reserve-memory-bytes", ArgType::kInt, "0",
                  "Bytes of GPU memory kept out of RTP-LLM's allocations.",
                  "radixserve sizes its KV pool from --mem-fraction-static or "
                  "--max-total-tokens."),
      Unsupported("host-reserve-memory-bytes", ArgType::kInt, "4294967296",
                  "Bytes of host memory RTP-LLM sets aside (4 GiB by default).",
                  "radixserve sizes its KV pool from --mem-fraction-static or "
                  "--max-total-tokens."),
      Unsupported("overlap-math-sm-count", ArgType::kInt, "0",
                  "Streaming multiprocessors given to compute while communication overlaps it.",
                  kGpuNote),
      Unsupported("overlap-comm-type", ArgType::kInt, "0",
                  "Strategy for overlapping computation with communication.", kGpuNote),
      Unsupported("m-split", ArgType::kInt, "0", "M_SPLIT tuning value for device GEMM operations.",
                  kGpuNote),
      UnsupportedSwitch("enable-comm-overlap", "true",
                        "Overlap communication between GPUs with computation.", kGpuNote),
      Unsupported("enable-layer-micro-batch", ArgType::kInt, "0",
                  "Layer-level micro-batching mode; 0 turns it off.", kGpuNote),
      UnsupportedSwitch("not-use-default-stream", "false",
                        "Launch work on a dedicated CUDA stream rather than the default one.",
                        kGpuNote),

      // DeepEP.
      UnsupportedSwitch(
          "use-deepep-moe", "false",
          "Dispatch MoE tokens between expert-parallel ranks with DeepEP; keep it off "
          "with a single expert-parallel rank.",
          kExpertNote),
      UnsupportedSwitch("use-deepep-internode", "false",
                        "Use DeepEP's kernels for traffic between nodes.", kExpertNote),
      UnsupportedSwitch("use-deepep-low-latency", "true", "Use DeepEP's low-latency dispatch mode.",
                        kExpertNote),
      UnsupportedSwitch("use-deepep-p2p-low-latency", "false",
                        "Use DeepEP's peer-to-peer low-latency mode.", kExpertNote),
      Unsupported("deep-ep-num-sm", ArgType::kInt, "0",
                  "Streaming multiprocessors reserved for DeepEP's communication buffer.",
                  kExpertNote),

      // Expert-parallel load balancing.
      Unsupported("eplb-mode", ArgType::kString, "\"NONE\"",
                  "What the expert-parallel load balancer does: nothing, collect statistics, "
                  "move experts, or both.",
                  kExpertNote),
      Unsupported("balance-method", ArgType::kString, "\"mix\"",
                  "Algorithm the expert load balancer uses to place experts.", kExpertNote),
      Unsupported("eplb-update-time", ArgType::kInt, "5000",
                  "Period of the expert load balancer; comparable to SGLang's "
                  "--eplb-rebalance-num-iterations.",
                  kExpertNote),
      Unsupported("eplb-balance-layer-per-step", ArgType::kInt, "1",
                  "Layers whose experts are moved in one balancer update; comparable to "
                  "SGLang's --eplb-rebalance-layers-per-chunk.",
                  kExpertNote),
      UnsupportedSwitch("eplb-force-repack", "false",
                        "Repack the experts of all ranks at every balancer update.", kExpertNote),
      Unsupported("eplb-stats-window-size", ArgType::kInt, "10",
                  "Number of recent periods of expert usage the balancer looks at.", kExpertNote),
      Unsupported("eplb-control-step", ArgType::kInt, "100",
                  "Debug: period at which balancer ranks synchronise their control state.",
                  kExpertNote),
      UnsupportedSwitch("eplb-test-mode", "false", "Debug: run the expert balancer in test mode.",
                        kExpertNote),
      UnsupportedSwitch("fake-balance-expert", "false",
                        "Debug: route tokens to experts as if the load were perfectly balanced.",
                        kExpertNote),

      // Sampling.
      UnsupportedSwitch("enable-flashinfer-sample-kernel", "true",
                        "Sample tokens with FlashInfer's GPU kernels.",
                        "FlashInfer is a GPU library; radixserve samples with its own code."),

      // Logging and profiling.
      UnsupportedSwitch("ft-nvtx", "false",
                        "Mark the engine's work with NVTX ranges for profiling.", kProfilingNote),
      {.name = "py-inference-log-response",
       .type = ArgType::kBool,
       .default_value = "false",
       .group = group::kRtpllm,
       .help = "Write each response's content to the log (SGLang's --log-requests logs "
               "requests and responses).",
       .cpu = Support::kNo,
       .cpu_note = "Not implemented yet: responses are not logged (see --log-requests).",
       .system = System::kRtpllm},
      UnsupportedSwitch("trace-memory", "false", "Record device memory allocations for debugging.",
                        kProfilingNote),
      UnsupportedSwitch("trace-malloc-stack", "false",
                        "Record the call stack of each memory allocation for debugging.",
                        kProfilingNote),
      UnsupportedSwitch("enable-device-perf", "false",
                        "Collect performance counters from the device.", kProfilingNote),
      UnsupportedSwitch("ft-core-dump-on-exception", "false",
                        "Write a core dump when the engine hits an exception.",
                        "radixserve reports errors to the request instead of dumping core."),
      Unsupported("ft-alog-conf-path", ArgType::kString, "null",
                  "Configuration file for RTP-LLM's alog logging library.",
                  "radixserve logs through spdlog; use --log-level."),
      UnsupportedSwitch("gen-timeline-sync", "false",
                        "Record a synchronised execution timeline for analysis.", kProfilingNote),
      Unsupported("torch-cuda-profiler-dir", ArgType::kString, "\"\"",
                  "Directory for PyTorch CUDA profiler traces.", kProfilingNote),

      // Speculative decoding.
      Unsupported("sp-model-type", ArgType::kString, "\"\"",
                  "Kind of draft model, for example deepseek-v3-mtp.", kSpeculativeNote),
      Unsupported("sp-type", ArgType::kString, "\"\"",
                  "Speculative decoding method; 'vanilla' turns it off and 'mtp' uses "
                  "multi-token prediction.",
                  kSpeculativeNote),
      Unsupported("sp-min-token-match", ArgType::kInt, "2",
                  "Shortest token match used when proposing draft tokens.", kSpeculativeNote),
      Unsupported("sp-max-token-match", ArgType::kInt, "2",
                  "Longest token match used when proposing draft tokens.", kSpeculativeNote),
      Unsupported("tree-decode-config", ArgType::kString, "\"\"",
                  "File describing the token tree for tree decoding.", kSpeculativeNote),
      Unsupported("gen-num-per-cycle", ArgType::kInt, "1",
                  "Most tokens produced for a request in one decode step.", kSpeculativeNote),
      UnsupportedSwitch("force-stream-sample", "false",
                        "Always sample speculative tokens in streaming fashion.", kSpeculativeNote),
      UnsupportedSwitch("force-score-context-attention", "true",
                        "Verify draft tokens with context (prefill) attention.", kSpeculativeNote),

      // RPC and service discovery.
      UnsupportedSwitch("use-local", "false",
                        "Find peer services locally instead of through discovery.", kClusterNote),
      Unsupported("remote-rpc-server-ip", ArgType::kString, "null",
                  "Address of a remote RPC server to forward work to.", kClusterNote),
      Unsupported("decode-cm2-config", ArgType::kString, "null",
                  "Service-discovery settings for locating decode servers.", kClusterNote),
      Unsupported("remote-vit-server-ip", ArgType::kString, "null",
                  "Address of a remote vision-encoder server.", kClusterNote),
      Unsupported("multimodal-part-cm2-config", ArgType::kString, "null",
                  "Service-discovery settings for locating multimodal servers.", kClusterNote),

      // Cache store.
      UnsupportedSwitch("cache-store-rdma-mode", "false",
                        "Move KV cache between servers over RDMA.", kClusterNote),
      Unsupported("wrr-available-ratio", ArgType::kInt, "80",
                  "Availability threshold of the weighted round-robin balancer between "
                  "workers.",
                  kClusterNote),
      {.name = "rank-factor",
       .type = ArgType::kInt,
       .default_value = "0",
       .choices = {"0", "1"},
       .group = group::kRtpllm,
       .help = "What the weighted round-robin balancer ranks workers by: 0 for KV cache "
               "usage, 1 for requests in flight.",
       .cpu = Support::kNo,
       .cpu_note = kClusterNote,
       .system = System::kRtpllm},

      // Scheduler.
      Unsupported("use-batch-decode-scheduler", ArgType::kBool, "false",
                  "Use a scheduler that decodes fixed-size batches, without continuous "
                  "batching.",
                  "radixserve always schedules with continuous batching."),
      {.name = "scheduler-reserve-resource-ratio",
       .type = ArgType::kInt,
       .default_value = "5",
       .group = group::kRtpllm,
       .help = "Percent of the KV cache the scheduler keeps free when admitting new "
               "requests, as headroom for running ones.",
       .cpu = Support::kNo,
       .cpu_note = "Not implemented yet: the KV reserve follows --schedule-conservativeness.",
       .system = System::kRtpllm},
      {.name = "enable-fast-gen",
       .type = ArgType::kBool,
       .default_value = "false",
       .group = group::kRtpllm,
       .help = "Split long prompts into chunks prefilled over several steps (chunked "
               "prefill); the chunk size is --fast-gen-context-budget, which is SGLang's "
               "--chunked-prefill-size.",
       .cpu = Support::kNo,
       .cpu_note = "Not implemented yet: long prompts are chunked by --chunked-prefill-size.",
       .system = System::kRtpllm},
      Unsupported("enable-partial-fallback", ArgType::kBool, "false",
                  "When the KV cache runs short, take back part of a request's cache instead "
                  "of all of it.",
                  "radixserve retracts whole requests, as SGLang does."),
      Unsupported("batch-decode-scheduler-batch-size", ArgType::kInt, "1",
                  "Batch size of the fixed-batch decode scheduler.",
                  "radixserve always schedules with continuous batching."),

      // Load balancing and performance records.
      UnsupportedSwitch("load-balance", "false",
                        "Adjust batch limits at run time from recorded step timings.",
                        "Not implemented in radixserve."),
      Unsupported("step-records-time-range", ArgType::kInt, "60000000",
                  "How long step timing records are kept, in microseconds.",
                  "Not implemented in radixserve."),
      Unsupported("step-records-max-size", ArgType::kInt, "1000", "Most step timing records kept.",
                  "Not implemented in radixserve."),
      UnsupportedSwitch("disable-pdl", "false",
                        "Turn off programmatic dependent launch between CUDA kernels.", kGpuNote),

      // 3FS.
      UnsupportedSwitch("enable-3fs", "false", "Keep KV cache in the 3FS distributed file system.",
                        "A 3FS-backed KV store is not available in radixserve."),

      // Model adaptation.
      {.name = "max-lora-model-size",
       .type = ArgType::kInt,
       .default_value = "-1",
       .group = group::kRtpllm,
       .help = "Largest LoRA adapter accepted, in bytes of its float32 matrices; -1 sets no limit.",
       .system = System::kRtpllm},
  };
}

std::vector<ExtraAlias> RtpllmAliases() {
  return {
      // Custom all-reduce off; RTP-LLM documents it as on by default (SGLang's default wins).
      {"disable-custom-all-reduce", Rtpllm("ft-disable-custom-ar")},
      {"ep-num-redundant-experts", Rtpllm("redundant_expert")},
      // Most requests in the running batch; RTP-LLM's 0 means "no override".
      {"max-running-requests", Rtpllm("max-batch-size")},
      // Most requests in one prefill batch.
      {"prefill-max-requests", Rtpllm("max-context-batch-size")},
      {"chunked-prefill-size", Rtpllm("fast-gen-context-budget")},
  };
}

}  // namespace radixserve::args

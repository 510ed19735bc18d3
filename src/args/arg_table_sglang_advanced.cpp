// SGLang arguments of the accelerator-oriented groups: NSA kernel backends, speculative decoding,
// expert parallelism, Mamba cache, hierarchical cache, double sparsity and offloading. The later
// groups (optimization/debug to deprecated) are in arg_table_sglang_advanced_2.cpp.
#include "args/arg_table_sglang_advanced.h"

#include "args/arg_groups.h"
#include "args/arg_table.h"

namespace radixserve::args {
namespace {

constexpr std::string_view kNoteNsa =
    "DeepSeek NSA sparse-attention kernels are GPU-only; radixserve has no NSA backend.";
constexpr std::string_view kNoteSpeculative =
    "Only --speculative-algorithm NGRAM with greedy verification is implemented; this argument "
    "has no effect on it.";
constexpr std::string_view kNoteAlgorithm =
    "NGRAM is implemented (greedy requests speculate; others decode normally); EAGLE, EAGLE3, "
    "NEXTN and STANDALONE are refused at startup.";
constexpr std::string_view kNoteDraftTokens =
    "With NGRAM: tokens per verify step, the last sampled token plus up to N - 1 drafts "
    "(default 8); the draft-model algorithms are not implemented.";
constexpr std::string_view kNoteNgram =
    "Used by --speculative-algorithm NGRAM (docs/speculative.md).";
constexpr std::string_view kNoteNgramBreadth =
    "NGRAM drafts one chain (breadth 1); tree drafts are not implemented, so with NGRAM an "
    "explicit value is refused at startup.";
constexpr std::string_view kNoteExpertParallel =
    "Expert parallelism spreads experts over several devices or ranks; radixserve runs every "
    "expert of an MoE model (Qwen2/3-MoE, OLMoE, Mixtral) in one process, reading only the "
    "experts a step's tokens chose. Placing experts across ranks waits for multi-process "
    "tensor parallelism.";
constexpr std::string_view kNoteGpuMoe =
    "GPU MoE kernels and collectives (FlashInfer, DeepEP) do not exist on the cpu device.";
constexpr std::string_view kNoteEplb =
    "Expert load balancing and redundant expert replicas need expert parallelism over several "
    "ranks; radixserve runs all experts in one process (no placement to balance).";
constexpr std::string_view kNoteMamba =
    "Hybrid Mamba/SSM models are not supported by radixserve yet.";
constexpr std::string_view kNoteHiCache =
    "On the cpu device the KV pool already lives in host memory; there is no second cache "
    "tier.";
constexpr std::string_view kNoteDoubleSparsity =
    "Double-sparsity attention kernels are not implemented in radixserve.";
constexpr std::string_view kNoteOffload =
    "Weights already live in host memory on the cpu device; there is nothing to offload.";

std::vector<ArgSpec> KernelAndSpeculativeArgs() {
  return {
      // Kernel backend (NSA models).
      {.name = "nsa-prefill-backend",
       .type = ArgType::kString,
       .default_value = "\"flashmla_sparse\"",
       .choices = {"flashmla_sparse", "flashmla_decode", "fa3", "tilelang", "aiter"},
       .group = group::kKernelBackend,
       .help = "Kernel used for prefill when the model uses DeepSeek NSA sparse attention; "
               "takes precedence over --attention-backend for that stage.",
       .cpu = Support::kNo,
       .cpu_note = kNoteNsa},
      {.name = "nsa-decode-backend",
       .type = ArgType::kString,
       .default_value = "\"flashmla_kv\"",
       .choices = {"flashmla_prefill", "flashmla_kv", "fa3", "tilelang", "aiter"},
       .group = group::kKernelBackend,
       .help = "Kernel used for decode when the model uses DeepSeek NSA sparse attention; "
               "takes precedence over --attention-backend for that stage.",
       .cpu = Support::kNo,
       .cpu_note = kNoteNsa},

      // Speculative decoding.
      {.name = "speculative-algorithm",
       .type = ArgType::kString,
       .choices = {"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"},
       .group = group::kSpeculative,
       .help = "Which speculative decoding method to use; unset turns speculation off.",
       .cpu = Support::kPartial,
       .cpu_note = kNoteAlgorithm,
       .cpu_values = {"NGRAM"}},
      {.name = "speculative-draft-model-path",
       .type = ArgType::kString,
       .group = group::kSpeculative,
       .help = "Draft model used to propose tokens, given as a model directory or a Hugging Face "
               "repo name.",
       .cpu = Support::kNo,
       .cpu_note = kNoteSpeculative,
       .aliases = {{"speculative-draft-model", System::kSglang}}},
      {.name = "speculative-draft-model-revision",
       .type = ArgType::kString,
       .group = group::kSpeculative,
       .help = "Revision (branch, tag or commit id) of the draft model; unset uses the "
               "default revision.",
       .cpu = Support::kNo,
       .cpu_note = kNoteSpeculative},
      {.name = "speculative-num-steps",
       .type = ArgType::kInt,
       .group = group::kSpeculative,
       .help = "How many draft steps the draft model runs per verification round.",
       .cpu = Support::kNo,
       .cpu_note = kNoteSpeculative},
      {.name = "speculative-eagle-topk",
       .type = ArgType::kInt,
       .group = group::kSpeculative,
       .help = "How many candidate tokens the EAGLE draft model branches into at each step.",
       .cpu = Support::kNo,
       .cpu_note = kNoteSpeculative},
      {.name = "speculative-num-draft-tokens",
       .type = ArgType::kInt,
       .group = group::kSpeculative,
       .help = "Total number of draft tokens proposed to the target model for one "
               "verification pass.",
       .cpu = Support::kPartial,
       .cpu_note = kNoteDraftTokens},
      {.name = "speculative-accept-threshold-single",
       .type = ArgType::kFloat,
       .default_value = "1.0",
       .group = group::kSpeculative,
       .help = "A draft token is accepted outright when the target model gives it a "
               "probability above this value.",
       .cpu = Support::kNo,
       .cpu_note = kNoteSpeculative},
      {.name = "speculative-accept-threshold-acc",
       .type = ArgType::kFloat,
       .default_value = "1.0",
       .group = group::kSpeculative,
       .help = "Divisor that raises a draft token's acceptance probability: a target "
               "probability p becomes min(1, p / value).",
       .cpu = Support::kNo,
       .cpu_note = kNoteSpeculative},
      {.name = "speculative-token-map",
       .type = ArgType::kString,
       .group = group::kSpeculative,
       .help = "File holding the reduced vocabulary that the draft model predicts over.",
       .cpu = Support::kNo,
       .cpu_note = kNoteSpeculative},
      {.name = "speculative-attention-mode",
       .type = ArgType::kString,
       .default_value = "\"prefill\"",
       .choices = {"prefill", "decode"},
       .group = group::kSpeculative,
       .help = "Whether target verification and draft extension run on the prefill or the "
               "decode attention kernels.",
       .cpu = Support::kNo,
       .cpu_note = kNoteSpeculative},
      {.name = "speculative-moe-runner-backend",
       .type = ArgType::kString,
       .group = group::kSpeculative,
       .help = "MoE runner backend for the EAGLE draft model (values as --moe-runner-backend); "
               "unset reuses the target's backend.",
       .cpu = Support::kNo,
       .cpu_note = kNoteSpeculative},
      {.name = "speculative-moe-a2a-backend",
       .type = ArgType::kString,
       .group = group::kSpeculative,
       .help = "MoE all-to-all backend for the EAGLE draft model (values as --moe-a2a-backend); "
               "unset reuses the target's backend.",
       .cpu = Support::kNo,
       .cpu_note = kNoteSpeculative},
      {.name = "speculative-ngram-min-match-window-size",
       .type = ArgType::kInt,
       .default_value = "1",
       .group = group::kSpeculative,
       .help = "Shortest suffix window that n-gram speculation tries to match against its "
               "cache.",
       .cpu = Support::kYes,
       .cpu_note = kNoteNgram},
      {.name = "speculative-ngram-max-match-window-size",
       .type = ArgType::kInt,
       .default_value = "12",
       .group = group::kSpeculative,
       .help = "Longest suffix window that n-gram speculation tries to match against its "
               "cache.",
       .cpu = Support::kYes,
       .cpu_note = kNoteNgram},
      {.name = "speculative-ngram-min-bfs-breadth",
       .type = ArgType::kInt,
       .default_value = "1",
       .group = group::kSpeculative,
       .help = "Lower bound on the breadth of the breadth-first draft search in n-gram "
               "speculation.",
       .cpu = Support::kNo,
       .cpu_note = kNoteNgramBreadth},
      {.name = "speculative-ngram-max-bfs-breadth",
       .type = ArgType::kInt,
       .default_value = "10",
       .group = group::kSpeculative,
       .help = "Upper bound on the breadth of the breadth-first draft search in n-gram "
               "speculation.",
       .cpu = Support::kNo,
       .cpu_note = kNoteNgramBreadth},
      {.name = "speculative-ngram-match-type",
       .type = ArgType::kString,
       .default_value = "\"BFS\"",
       .choices = {"BFS", "PROB"},
       .group = group::kSpeculative,
       .help = "How drafts are picked from the n-gram cache tree: breadth-first or by "
               "probability.",
       .cpu = Support::kYes,
       .cpu_note = kNoteNgram},
      {.name = "speculative-ngram-branch-length",
       .type = ArgType::kInt,
       .default_value = "18",
       .group = group::kSpeculative,
       .help = "Length of each branch stored in the n-gram speculation cache.",
       .cpu = Support::kYes,
       .cpu_note = kNoteNgram},
      {.name = "speculative-ngram-capacity",
       .type = ArgType::kInt,
       .default_value = "10000000",
       .group = group::kSpeculative,
       .help = "Maximum number of entries the n-gram speculation cache keeps.",
       .cpu = Support::kYes,
       .cpu_note = kNoteNgram},
  };
}

std::vector<ArgSpec> ExpertParallelArgs() {
  return {
      {.name = "ep-size",
       .type = ArgType::kInt,
       .default_value = "1",
       .group = group::kExpertParallel,
       .help = "Number of ranks the MoE experts are partitioned across.",
       .cpu = Support::kNo,
       .cpu_note = kNoteExpertParallel,
       .aliases = {{"expert-parallel-size", System::kSglang}, {"ep", System::kSglang}}},
      {.name = "moe-a2a-backend",
       .type = ArgType::kString,
       .default_value = "\"none\"",
       .choices = {"none", "deepep", "ascend_fuseep"},
       .group = group::kExpertParallel,
       .help = "Communication library that exchanges tokens between expert-parallel ranks; "
               "none keeps the plain collective path.",
       .cpu = Support::kNo,
       .cpu_note = kNoteExpertParallel},
      {.name = "moe-runner-backend",
       .type = ArgType::kString,
       .default_value = "\"auto\"",
       .choices = {"auto", "triton", "triton_kernel", "flashinfer_trtllm", "flashinfer_cutlass",
                   "flashinfer_mxfp4", "flashinfer_cutedsl"},
       .group = group::kExpertParallel,
       .help = "Kernel family that computes the MoE expert layers; auto picks one for the "
               "device and model.",
       .cpu = Support::kPartial,
       .cpu_note = "radixserve computes every MoE layer with its own CPU expert GEMM (tokens "
                   "grouped by expert, model/moe_ffn.h); any other value logs one line saying "
                   "it maps to that."},
      {.name = "flashinfer-mxfp4-moe-precision",
       .type = ArgType::kString,
       .default_value = "\"default\"",
       .choices = {"default", "bf16"},
       .group = group::kExpertParallel,
       .help = "Arithmetic precision of the FlashInfer MXFP4 MoE kernels.",
       .cpu = Support::kNo,
       .cpu_note = kNoteGpuMoe},
      {.name = "enable-flashinfer-allreduce-fusion",
       .type = ArgType::kFlag,
       .default_value = "false",
       .group = group::kExpertParallel,
       .help = "Fuse the all-reduce with the following residual add and RMSNorm using "
               "FlashInfer.",
       .cpu = Support::kNo,
       .cpu_note = kNoteGpuMoe},
      {.name = "deepep-mode",
       .type = ArgType::kString,
       .default_value = "\"auto\"",
       .choices = {"normal", "low_latency", "auto"},
       .group = group::kExpertParallel,
       .help = "DeepEP dispatch mode; auto uses low_latency for decode batches and normal for "
               "prefill batches.",
       .cpu = Support::kNo,
       .cpu_note = kNoteGpuMoe},
      {.name = "ep-num-redundant-experts",
       .type = ArgType::kInt,
       .default_value = "0",
       .group = group::kExpertParallel,
       .help = "How many extra expert replicas to place across the expert-parallel ranks.",
       .cpu = Support::kNo,
       .cpu_note = kNoteEplb},
      {.name = "ep-dispatch-algorithm",
       .type = ArgType::kString,
       .group = group::kExpertParallel,
       .help = "How a token picks among the ranks holding replicas of its expert (SGLang knows "
               "static, dynamic and fake).",
       .cpu = Support::kNo,
       .cpu_note = kNoteEplb},
      {.name = "init-expert-location",
       .type = ArgType::kString,
       .default_value = "\"trivial\"",
       .group = group::kExpertParallel,
       .help = "Initial placement of experts on the expert-parallel ranks.",
       .cpu = Support::kNo,
       .cpu_note = kNoteEplb},
      {.name = "enable-eplb",
       .type = ArgType::kFlag,
       .default_value = "false",
       .group = group::kExpertParallel,
       .help = "Turn on expert-parallel load balancing, which periodically moves experts "
               "between ranks.",
       .cpu = Support::kNo,
       .cpu_note = kNoteEplb},
      {.name = "eplb-algorithm",
       .type = ArgType::kString,
       .default_value = "\"auto\"",
       .group = group::kExpertParallel,
       .help = "Which placement algorithm the expert load balancer uses.",
       .cpu = Support::kNo,
       .cpu_note = kNoteEplb},
      {.name = "eplb-rebalance-num-iterations",
       .type = ArgType::kInt,
       .default_value = "1000",
       .group = group::kExpertParallel,
       .help = "Number of forward iterations between automatic expert rebalancing runs.",
       .cpu = Support::kNo,
       .cpu_note = kNoteEplb},
      {.name = "eplb-rebalance-layers-per-chunk",
       .type = ArgType::kInt,
       .group = group::kExpertParallel,
       .help = "How many layers are rebalanced in one forward pass.",
       .cpu = Support::kNo,
       .cpu_note = kNoteEplb},
      {.name = "eplb-min-rebalancing-utilization-threshold",
       .type = ArgType::kFloat,
       .default_value = "1.0",
       .group = group::kExpertParallel,
       .help = "Rebalancing only happens when average device utilization is at least this "
               "fraction (between 0 and 1).",
       .cpu = Support::kNo,
       .cpu_note = kNoteEplb},
      {.name = "expert-distribution-recorder-mode",
       .type = ArgType::kString,
       .group = group::kExpertParallel,
       .help = "What the expert distribution recorder collects (SGLang knows stat, "
               "stat_approx, per_pass and per_token); unset disables it.",
       .cpu = Support::kNo,
       .cpu_note = "Expert distribution recording is not implemented in radixserve."},
      {.name = "expert-distribution-recorder-buffer-size",
       .type = ArgType::kInt,
       .group = group::kExpertParallel,
       .help = "Capacity of the recorder's ring buffer; -1 means unbounded.",
       .cpu = Support::kNo,
       .cpu_note = "Expert distribution recording is not implemented in radixserve."},
      {.name = "enable-expert-distribution-metrics",
       .type = ArgType::kFlag,
       .default_value = "false",
       .group = group::kExpertParallel,
       .help = "Log metrics describing how evenly tokens are spread over the experts.",
       .cpu = Support::kNo,
       .cpu_note = "Expert distribution recording is not implemented in radixserve."},
      {.name = "deepep-config",
       .type = ArgType::kString,
       .group = group::kExpertParallel,
       .help = "DeepEP tuning for the cluster, given inline as JSON text or as the path of a "
               "file containing it.",
       .cpu = Support::kNo,
       .cpu_note = kNoteGpuMoe},
      {.name = "moe-dense-tp-size",
       .type = ArgType::kInt,
       .group = group::kExpertParallel,
       .help = "Tensor-parallel degree for the dense MLP layers of MoE models, for when the "
               "full TP size would make GEMM dimensions too small.",
       .cpu = Support::kNo,
       .cpu_note = "Tensor parallelism of dense layers needs several ranks."},
      {.name = "elastic-ep-backend",
       .type = ArgType::kString,
       .group = group::kExpertParallel,
       .help = "Collective library used by elastic expert parallelism (SGLang supports "
               "mooncake).",
       .cpu = Support::kNo,
       .cpu_note = kNoteExpertParallel},
      {.name = "mooncake-ib-device",
       .type = ArgType::kString,
       .group = group::kExpertParallel,
       .help = "Comma-separated InfiniBand devices for the Mooncake backend; unset detects "
               "them automatically.",
       .cpu = Support::kNo,
       .cpu_note = "Mooncake needs RDMA transfer engines; not available in radixserve."},
  };
}

std::vector<ArgSpec> CacheAndOffloadArgs() {
  return {
      // Mamba cache.
      {.name = "max-mamba-cache-size",
       .type = ArgType::kInt,
       .group = group::kMamba,
       .help = "Upper bound on the number of Mamba state slots.",
       .cpu = Support::kNo,
       .cpu_note = kNoteMamba},
      {.name = "mamba-ssm-dtype",
       .type = ArgType::kString,
       .default_value = "\"float32\"",
       .choices = {"float32", "bfloat16"},
       .group = group::kMamba,
       .help = "Precision in which Mamba layers keep their recurrent state.",
       .cpu = Support::kNo,
       .cpu_note = kNoteMamba},
      {.name = "mamba-full-memory-ratio",
       .type = ArgType::kFloat,
       .default_value = "0.2",
       .group = group::kMamba,
       .help = "Memory for Mamba states as a fraction of the memory given to the full-attention "
               "KV cache.",
       .cpu = Support::kNo,
       .cpu_note = kNoteMamba},
      {.name = "mamba-scheduler-strategy",
       .type = ArgType::kString,
       .default_value = "\"auto\"",
       .choices = {"auto", "no_buffer", "extra_buffer"},
       .group = group::kMamba,
       .help = "Whether extra Mamba state buffers are kept so states can be cached with the "
               "overlap scheduler (extra_buffer) or not (no_buffer); auto means no_buffer.",
       .cpu = Support::kNo,
       .cpu_note = kNoteMamba},
      {.name = "mamba-track-interval",
       .type = ArgType::kInt,
       .default_value = "256",
       .group = group::kMamba,
       .help = "Every how many decoded tokens the Mamba state is snapshotted; used only with "
               "the extra_buffer strategy.",
       .cpu = Support::kNo,
       .cpu_note = kNoteMamba},

      // Hierarchical cache.
      {.name = "enable-hierarchical-cache",
       .type = ArgType::kFlag,
       .default_value = "false",
       .group = group::kHierarchicalCache,
       .help = "Back the device KV cache with a larger host-memory pool so evicted prefixes can "
               "be loaded back instead of recomputed.",
       .cpu = Support::kNo,
       .cpu_note = kNoteHiCache},
      {.name = "hicache-ratio",
       .type = ArgType::kFloat,
       .default_value = "2.0",
       .group = group::kHierarchicalCache,
       .help = "Size of the host KV pool as a multiple of the device KV pool.",
       .cpu = Support::kNo,
       .cpu_note = kNoteHiCache},
      {.name = "hicache-size",
       .type = ArgType::kInt,
       .default_value = "0",
       .group = group::kHierarchicalCache,
       .help = "Size of the host KV pool in GB; when non-zero it replaces --hicache-ratio.",
       .cpu = Support::kNo,
       .cpu_note = kNoteHiCache},
      {.name = "hicache-write-policy",
       .type = ArgType::kString,
       .default_value = "\"write_through\"",
       .choices = {"write_back", "write_through", "write_through_selective"},
       .group = group::kHierarchicalCache,
       .help = "When cached KV is copied to the host pool: on first hit, after repeated hits "
               "(selective), or only on device eviction (write_back).",
       .cpu = Support::kNo,
       .cpu_note = kNoteHiCache},
      {.name = "radix-eviction-policy",
       .type = ArgType::kString,
       .default_value = "\"lru\"",
       .choices = {"lru", "lfu"},
       .group = group::kHierarchicalCache,
       .help = "Order in which unlocked radix-tree leaves are evicted: least recently used or "
               "least frequently used."},
      {.name = "hicache-io-backend",
       .type = ArgType::kString,
       .default_value = "\"kernel\"",
       .choices = {"direct", "kernel", "kernel_ascend"},
       .group = group::kHierarchicalCache,
       .help = "Mechanism that copies KV between the device and host pools.",
       .cpu = Support::kNo,
       .cpu_note = kNoteHiCache},
      {.name = "hicache-mem-layout",
       .type = ArgType::kString,
       .default_value = "\"layer_first\"",
       .choices = {"layer_first", "page_first", "page_first_direct", "page_first_kv_split"},
       .group = group::kHierarchicalCache,
       .help = "Memory layout of the host KV pool.",
       .cpu = Support::kNo,
       .cpu_note = kNoteHiCache},
      {.name = "hicache-storage-backend",
       .type = ArgType::kString,
       .choices = {"file", "mooncake", "hf3fs", "nixl", "aibrix"},
       .group = group::kHierarchicalCache,
       .help = "Optional third cache tier below host memory that stores KV pages (files or a "
               "distributed store).",
       .cpu = Support::kNo,
       .cpu_note = kNoteHiCache},
      {.name = "hicache-storage-prefetch-policy",
       .type = ArgType::kString,
       .default_value = "\"best_effort\"",
       .choices = {"best_effort", "wait_complete", "timeout"},
       .group = group::kHierarchicalCache,
       .help = "When prefetching KV from the storage tier stops: as soon as possible, once "
               "complete, or after a timeout.",
       .cpu = Support::kNo,
       .cpu_note = kNoteHiCache},
      {.name = "hicache-storage-backend-extra-config",
       .type = ArgType::kJson,
       .group = group::kHierarchicalCache,
       .help = "JSON object of additional settings handed to the storage tier backend.",
       .cpu = Support::kNo,
       .cpu_note = kNoteHiCache},
      {.name = "enable-lmcache",
       .type = ArgType::kFlag,
       .default_value = "false",
       .group = group::kHierarchicalCache,
       .help = "Use the LMCache library instead of the built-in hierarchical cache.",
       .cpu = Support::kNo,
       .cpu_note = "LMCache is a Python/GPU library; radixserve does not link it."},

      // Double sparsity.
      {.name = "enable-double-sparsity",
       .type = ArgType::kFlag,
       .default_value = "false",
       .group = group::kDoubleSparsity,
       .help = "Use double-sparsity attention, which attends only to heavy channels and tokens "
               "during decode.",
       .cpu = Support::kNo,
       .cpu_note = kNoteDoubleSparsity},
      {.name = "ds-channel-config-path",
       .type = ArgType::kString,
       .group = group::kDoubleSparsity,
       .help = "File describing which channels double-sparsity attention treats as heavy.",
       .cpu = Support::kNo,
       .cpu_note = kNoteDoubleSparsity},
      {.name = "ds-heavy-channel-num",
       .type = ArgType::kInt,
       .default_value = "32",
       .group = group::kDoubleSparsity,
       .help = "How many heavy channels double-sparsity attention keeps.",
       .cpu = Support::kNo,
       .cpu_note = kNoteDoubleSparsity},
      {.name = "ds-heavy-token-num",
       .type = ArgType::kInt,
       .default_value = "256",
       .group = group::kDoubleSparsity,
       .help = "How many heavy tokens double-sparsity attention attends to.",
       .cpu = Support::kNo,
       .cpu_note = kNoteDoubleSparsity},
      {.name = "ds-heavy-channel-type",
       .type = ArgType::kString,
       .default_value = "\"qk\"",
       .group = group::kDoubleSparsity,
       .help = "Which projection the heavy channels are selected from (for example qk).",
       .cpu = Support::kNo,
       .cpu_note = kNoteDoubleSparsity},
      {.name = "ds-sparse-decode-threshold",
       .type = ArgType::kInt,
       .default_value = "4096",
       .group = group::kDoubleSparsity,
       .help = "Sequence length from which decode switches from dense attention to the sparse "
               "kernel.",
       .cpu = Support::kNo,
       .cpu_note = kNoteDoubleSparsity},

      // Offloading.
      {.name = "cpu-offload-gb",
       .type = ArgType::kInt,
       .default_value = "0",
       .group = group::kOffloading,
       .help = "Gigabytes of host RAM set aside for weights moved off the accelerator.",
       .cpu = Support::kNo,
       .cpu_note = kNoteOffload},
      {.name = "offload-group-size",
       .type = ArgType::kInt,
       .default_value = "-1",
       .group = group::kOffloading,
       .help = "Layers are offloaded in groups of this many; -1 disables layer-group "
               "offloading.",
       .cpu = Support::kNo,
       .cpu_note = kNoteOffload},
      {.name = "offload-num-in-group",
       .type = ArgType::kInt,
       .default_value = "1",
       .group = group::kOffloading,
       .help = "How many layers of each group are kept off the accelerator.",
       .cpu = Support::kNo,
       .cpu_note = kNoteOffload},
      {.name = "offload-prefetch-step",
       .type = ArgType::kInt,
       .default_value = "1",
       .group = group::kOffloading,
       .help = "How many layers ahead offloaded weights are fetched back.",
       .cpu = Support::kNo,
       .cpu_note = kNoteOffload},
      {.name = "offload-mode",
       .type = ArgType::kString,
       .default_value = "\"cpu\"",
       .group = group::kOffloading,
       .help = "Where offloaded layers are kept and how they are brought back.",
       .cpu = Support::kNo,
       .cpu_note = kNoteOffload},
  };
}

void AppendAll(std::vector<ArgSpec>& into, std::vector<ArgSpec> part) {
  for (auto& spec : part) into.push_back(std::move(spec));
}

}  // namespace

std::vector<ArgSpec> SglangAdvancedArgs() {
  std::vector<ArgSpec> args = KernelAndSpeculativeArgs();
  AppendAll(args, ExpertParallelArgs());
  AppendAll(args, CacheAndOffloadArgs());
  AppendAll(args, SglangAdvancedArgs2());
  return args;
}

}  // namespace radixserve::args

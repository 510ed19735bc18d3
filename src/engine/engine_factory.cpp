#include "engine/engine_factory.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "args/validate.h"
#include "common/log.h"
#include "engine/dp_engine.h"
#include "engine/engine_config.h"
#include "engine/engine_loop.h"
#include "engine/load_balancer.h"
#include "kv/kv_block_hash.h"
#include "kv/kv_memory.h"
#include "kv/kv_scales_file.h"
#include "model/model_loader.h"

namespace radixserve::engine {
namespace {

namespace key = args::key;

// Where a replica stands among --dp-size replicas, and the host memory they all size against
// (read once, so that the first replica's pool does not shrink the next one's budget).
struct ReplicaPlace {
  int32_t rank = 0;
  int32_t size = 1;
  std::optional<kv::HostMemory> memory;
};

// --kv-cache-dtype auto stores K/V in the model's data type, as SGLang does: --dtype when it is
// given, else the checkpoint's torch_dtype (for GGUF, from general.file_type: F32, F16 or BF16
// files). Block-quantized GGUF files have none and get fp16, llama.cpp's default KV type.
kv::KvDtype AutoKvDtype(const args::ServerArgs& args, const model::ModelConfig& mc) {
  std::string dtype = "auto";
  if (!args.IsNull(key::kDtype)) dtype = args.GetString(key::kDtype);
  const auto format = model::DtypeFormat(dtype == "auto" ? mc.torch_dtype : dtype);
  if (format == kernels::WeightFormat::kBF16) return kv::KvDtype::kBF16;
  if (format == kernels::WeightFormat::kF32) return kv::KvDtype::kF32;
  return kv::KvDtype::kF16;  // half, float16, and quantized GGUF files
}

// What makes a token's K/V what it is, beyond the tokens before it: the weights (each weight
// file's name, size and modification time), the arguments that change the computation, the KV
// element type, scales and geometry. Stored blocks of another tag are never used.
uint64_t ModelTag(const args::ServerArgs& args, const model::ModelConfig& mc,
                  const kv::KvMemoryOptions& kv_options, size_t block_tokens) {
  namespace fs = std::filesystem;
  std::string id =
      fmt::format("{}|{}|{}|{}|{}|{}|{}", mc.model_type, mc.num_layers, mc.num_kv_heads,
                  mc.head_dim, mc.vocab_size, kv::KvDtypeName(kv_options.dtype), block_tokens);
  for (const args::ArgKey k :
       {key::kModelPath, key::kRevision, key::kDtype, key::kQuantization,
        key::kJsonModelOverrideArgs, key::kContextLength, key::kTpSize, key::kLoadFormat}) {
    id += '|';
    id += args.Get(k).dump();
  }
  std::error_code ec;
  const fs::path path = fs::weakly_canonical(args.GetString(key::kModelPath), ec);
  std::vector<fs::path> files;
  if (fs::is_directory(path, ec)) {
    for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
      if (entry.is_regular_file(ec)) files.push_back(entry.path());
    }
  } else {
    files.push_back(path);
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    const auto size = fs::file_size(file, ec);
    const auto mtime = fs::last_write_time(file, ec).time_since_epoch().count();
    id += fmt::format("|{}:{}:{}", file.filename().string(), ec ? 0 : size,
                      static_cast<int64_t>(mtime));
  }
  uint64_t tag = kv::HashString(0, id);
  for (const std::vector<float>* scales : {&kv_options.scales.k, &kv_options.scales.v}) {
    tag = kv::HashBytes(tag, scales->data(), scales->size() * sizeof(float));
  }
  return tag;
}

// The storage tier's settings: --hicache-* and the file backend's directory
// ($SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR, else /tmp/hicache, as SGLang's HiCacheFile).
Expected<kv::HiCacheOptions> MakeHiCacheOptions(const args::ServerArgs& args,
                                                const model::ModelConfig& mc,
                                                const kv::KvMemoryOptions& kv_options,
                                                int32_t replicas) {
  kv::HiCacheOptions options;
  const char* dir = std::getenv("SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR");
  options.directory = dir != nullptr && *dir != '\0' ? dir : "/tmp/hicache";
  // Blocks of at least 64 tokens (one file each), whole pages.
  const auto page = static_cast<size_t>(kv_options.page_size);
  options.block_tokens = page >= 64 ? page : (64 + page - 1) / page * page;
  const int64_t size_gb = args.GetInt(key::kHicacheSize);
  if (size_gb > 0) {
    options.capacity_bytes = static_cast<uint64_t>(size_gb) * (1ull << 30) /
                             static_cast<uint64_t>(std::max(replicas, 1));
  } else {
    options.capacity_ratio = args.GetFloat(key::kHicacheRatio);
  }
  RADIX_ASSIGN_OR_RETURN(options.write_policy,
                         kv::ParseHiCacheWritePolicy(args.GetString(key::kHicacheWritePolicy)));
  RADIX_ASSIGN_OR_RETURN(
      options.prefetch_policy,
      kv::ParseHiCachePrefetchPolicy(args.GetString(key::kHicacheStoragePrefetchPolicy)));
  if (!args.IsNull(key::kHicacheStorageBackendExtraConfig)) {
    // ResolveServerArgs checked the keys and types.
    const nlohmann::json& extra = args.Get(key::kHicacheStorageBackendExtraConfig);
    options.prefetch_threshold =
        extra.value("prefetch_threshold", static_cast<int64_t>(options.prefetch_threshold));
    options.prefetch_timeout_base =
        extra.value("prefetch_timeout_base", options.prefetch_timeout_base);
    options.prefetch_timeout_per_ki_token =
        extra.value("prefetch_timeout_per_ki_token", options.prefetch_timeout_per_ki_token);
  }
  options.model_tag = ModelTag(args, mc, kv_options, options.block_tokens);
  // LoRA namespaces ("L<load id>:") name adapters by a per-process id: never stored.
  options.persistable = [](std::string_view ns) { return ns.empty() || ns.front() != 'L'; };
  return options;
}

Expected<std::unique_ptr<EngineLoop>> CreateReplica(
    const args::ServerArgs& args, std::shared_ptr<const model::CausalLM> model,
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer, ThreadPool* pool,
    const ReplicaPlace& place, std::shared_ptr<const model::CausalLM> draft_model) {
  const model::ModelConfig& mc = model->config();
  const std::string dtype_flag =
      !args.IsNull(key::kKvCacheDtype) ? args.GetString(key::kKvCacheDtype) : "auto";
  RADIX_ASSIGN_OR_RETURN(kv::KvDtype dtype,
                         kv::ParseKvCacheDtype(dtype_flag, AutoKvDtype(args, mc)));
  std::string eviction = "lru";
  if (!args.IsNull(key::kRadixEvictionPolicy)) {
    eviction = args.GetString(key::kRadixEvictionPolicy);
  }
  RADIX_ASSIGN_OR_RETURN(kv::EvictionPolicy eviction_policy, kv::ParseEvictionPolicy(eviction));

  kv::KvMemoryOptions options;
  options.num_layers = static_cast<int32_t>(mc.num_layers);
  options.kv_heads = static_cast<int32_t>(mc.num_kv_heads);
  options.head_dim = static_cast<int32_t>(mc.head_dim);
  options.values_in_keys = mc.kv_values_in_keys();
  options.dtype = dtype;
  if (!args.IsNull(key::kQuantizationParamPath)) {
    // ResolveServerArgs already required fp8_e4m3 and --tp-size 1.
    RADIX_ASSIGN_OR_RETURN(
        options.scales, kv::LoadKvScalesFile(args.GetString(key::kQuantizationParamPath),
                                             static_cast<int32_t>(mc.num_layers), mc.model_type));
  }
  options.context_len = mc.context_length;
  options.page_size = static_cast<int32_t>(args.GetOptionalInt(key::kPageSize).value_or(1));
  options.max_total_tokens = args.GetOptionalInt(key::kMaxTotalTokens);
  if (options.max_total_tokens) {
    *options.max_total_tokens = std::max<int64_t>(1, *options.max_total_tokens / place.size);
  }
  // Replicas of the pool on this machine: data-parallel engines, or tensor- and pipeline-parallel
  // ranks (each a process with a pool of the leader's slot count over at most the leader's
  // layers, src/main/tensor_parallel.h).
  options.replicas =
      place.size * static_cast<int32_t>(args::ModelSplitRanks(args) * args.GetInt(key::kPpSize) /
                                        args.GetInt(key::kNnodes));
  options.memory = place.memory;
  if (!args.IsNull(key::kMemFractionStatic)) {
    options.mem_fraction_static = args.GetFloat(key::kMemFractionStatic);
  }
  options.max_running_requests = args.GetOptionalInt(key::kMaxRunningRequests);
  options.disable_radix_cache = args.GetBool(key::kDisableRadixCache);
  options.eviction_policy = eviction_policy;
  options.weights_bytes = static_cast<uint64_t>(model->weight_bytes());
  if (draft_model == model) {
    // NEXTN: the target's multi-token-prediction block (its weights are the target's), one layer
    // of the target's K/V geometry, and the target's hidden state per slot.
    options.draft = kv::KvMemoryOptions::DraftGeometry{
        1, static_cast<int32_t>(mc.num_kv_heads), static_cast<int32_t>(mc.head_dim),
        mc.kv_values_in_keys(), mc.hidden_size * static_cast<int64_t>(sizeof(float))};
    options.draft_scratch_rows =
        kMaxDraftingSequences * static_cast<size_t>(args.GetInt(key::kSpeculativeNumSteps));
  } else if (draft_model != nullptr) {
    // The replicas share the draft's weights as they share the target's.
    const model::ModelConfig& dc = draft_model->config();
    options.weights_bytes += static_cast<uint64_t>(draft_model->weight_bytes());
    options.draft = kv::KvMemoryOptions::DraftGeometry{static_cast<int32_t>(dc.num_layers),
                                                       static_cast<int32_t>(dc.num_kv_heads),
                                                       static_cast<int32_t>(dc.head_dim)};
    options.draft_scratch_rows =
        kMaxDraftingSequences * static_cast<size_t>(args.GetInt(key::kSpeculativeNumSteps));
  }
  if (!args.IsNull(key::kHicacheStorageBackend)) {
    RADIX_ASSIGN_OR_RETURN(options.hicache, MakeHiCacheOptions(args, mc, options, place.size));
  }
  RADIX_ASSIGN_OR_RETURN(std::unique_ptr<kv::KvMemory> memory, kv::KvMemory::Create(options));

  RADIX_ASSIGN_OR_RETURN(EngineConfig config,
                         MakeEngineConfig(args, mc.context_length,
                                          static_cast<int64_t>(memory->max_total_num_tokens()),
                                          memory->max_running_requests()));
  for (const int32_t id : config.first_allowed_tokens) {
    if (id >= mc.vocab_size) {
      return InvalidArgument(fmt::format(
          "--first_token_constraint_mode: FIRST_ALLOWED_TOKENS names token {}, outside the "
          "vocabulary ({} tokens).",
          id, mc.vocab_size));
    }
  }
  config.dp_rank = place.rank;
  config.dp_size = place.size;
  RADIX_ASSIGN_OR_RETURN(std::unique_ptr<sched::Scheduler> scheduler,
                         sched::Scheduler::Create(config.sched, memory.get()));

  const std::string prefix = place.size > 1 ? fmt::format("[DP{}] ", place.rank) : "";
  RADIX_LOG_INFO(
      "{}max_total_num_tokens={}, chunked_prefill_size={}, max_prefill_tokens={}, "
      "max_running_requests={}, context_len={}, available_cpu_mem={:.2f} GB",
      prefix, memory->max_total_num_tokens(), config.sched.chunked_prefill_size.value_or(-1),
      config.sched.max_prefill_tokens, config.sched.max_running_requests, config.context_len,
      static_cast<double>(memory->sizing().available_bytes) / (1024.0 * 1024.0 * 1024.0));

  auto engine = std::make_unique<EngineLoop>(std::move(config), std::move(memory),
                                             std::move(scheduler), std::move(model),
                                             std::move(tokenizer), pool, std::move(draft_model));
  engine->Start();
  return engine;
}

}  // namespace

Expected<std::unique_ptr<Engine>> CreateEngine(
    const args::ServerArgs& args, std::shared_ptr<const model::CausalLM> model,
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer, ThreadPool* pool,
    std::shared_ptr<const model::CausalLM> draft_model) {
  RADIX_CHECK(model != nullptr && pool != nullptr);
  const bool standalone = !args.IsNull(key::kSpeculativeAlgorithm) &&
                          args.GetString(key::kSpeculativeAlgorithm) == "STANDALONE";
  if (args.GetOptionalString(key::kSpeculativeAlgorithm) == "NEXTN") {
    // The target drafts with its own multi-token-prediction block (loaded with it).
    if (draft_model != nullptr) {
      return InvalidArgument("argument --speculative-algorithm: NEXTN takes no draft model");
    }
    draft_model = model;
  } else if (standalone != (draft_model != nullptr)) {
    return InvalidArgument(
        "argument --speculative-draft-model-path: a draft model goes with (and only with) "
        "--speculative-algorithm STANDALONE");
  }
  if (draft_model != nullptr && draft_model->config().vocab_size != model->config().vocab_size) {
    return InvalidArgument(fmt::format(
        "argument --speculative-draft-model-path: the draft model's vocabulary ({} tokens) "
        "differs from the target's ({}); STANDALONE needs the same tokenizer",
        draft_model->config().vocab_size, model->config().vocab_size));
  }
  const auto dp_size = static_cast<int32_t>(args.GetOptionalInt(key::kDpSize).value_or(1));
  if (dp_size < 1) return InvalidArgument("--dp-size must be at least 1");
  if (dp_size == 1) {
    RADIX_ASSIGN_OR_RETURN(auto replica, CreateReplica(args, std::move(model), std::move(tokenizer),
                                                       pool, {}, std::move(draft_model)));
    return std::unique_ptr<Engine>(std::move(replica));
  }
  std::string method_name = "round_robin";
  if (!args.IsNull(key::kLoadBalanceMethod)) {
    method_name = args.GetString(key::kLoadBalanceMethod);
  }
  RADIX_ASSIGN_OR_RETURN(LoadBalanceMethod method, ParseLoadBalanceMethod(method_name));
  ReplicaPlace place;
  place.size = dp_size;
  RADIX_ASSIGN_OR_RETURN(place.memory, kv::StartupHostMemory());
  // The --threads budget is split between the replicas, at least one thread each.
  const int threads = std::max(1, pool->size() / dp_size);
  std::vector<std::unique_ptr<ThreadPool>> pools;
  std::vector<std::unique_ptr<Engine>> replicas;
  for (int32_t rank = 0; rank < dp_size; ++rank) {
    pools.push_back(std::make_unique<ThreadPool>(threads));
    place.rank = rank;
    auto replica = CreateReplica(args, model, tokenizer, pools.back().get(), place, draft_model);
    if (!replica.ok()) {
      for (auto& started : replicas) started->Shutdown();
      return replica.status();
    }
    replicas.push_back(std::move(replica).value());
  }
  RADIX_LOG_INFO("Data parallelism: {} replicas, {} threads each, load balance method {}", dp_size,
                 threads, method_name);
  return std::unique_ptr<Engine>(
      std::make_unique<DpEngine>(std::move(pools), std::move(replicas), method));
}

}  // namespace radixserve::engine

#include "engine/engine_factory.h"

#include "common/log.h"
#include "engine/engine_config.h"
#include "engine/engine_loop.h"
#include "kv/kv_memory.h"

namespace radixserve::engine {

Expected<std::unique_ptr<Engine>> CreateEngine(
    const args::ServerArgs& args, std::shared_ptr<const model::CausalLM> model,
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer, ThreadPool* pool) {
  RADIX_CHECK(model != nullptr && pool != nullptr);
  const model::ModelConfig& mc = model->config();
  const std::string dtype_flag =
      args.values().contains("kv_cache_dtype") && !args.IsNull("kv_cache_dtype")
          ? args.GetString("kv_cache_dtype")
          : "auto";
  Expected<kv::KvDtype> dtype = kv::ParseKvCacheDtype(dtype_flag, kv::KvDtype::kF32);
  if (!dtype.ok()) return dtype.status();
  if (*dtype != kv::KvDtype::kF32) {
    return Unsupported("--kv-cache-dtype " + dtype_flag +
                       ": the CPU attention kernels read a float32 KV cache; use auto");
  }
  std::string eviction = "lru";
  if (args.values().contains("radix_eviction_policy") && !args.IsNull("radix_eviction_policy")) {
    eviction = args.GetString("radix_eviction_policy");
  }
  Expected<kv::EvictionPolicy> eviction_policy = kv::ParseEvictionPolicy(eviction);
  if (!eviction_policy.ok()) return eviction_policy.status();

  kv::KvMemoryOptions options;
  options.num_layers = static_cast<int32_t>(mc.num_layers);
  options.kv_heads = static_cast<int32_t>(mc.num_kv_heads);
  options.head_dim = static_cast<int32_t>(mc.head_dim);
  options.dtype = *dtype;
  options.context_len = mc.context_length;
  options.page_size = static_cast<int32_t>(OptionalIntArg(args, "page_size").value_or(1));
  options.max_total_tokens = OptionalIntArg(args, "max_total_tokens");
  if (args.values().contains("mem_fraction_static") && !args.IsNull("mem_fraction_static")) {
    options.mem_fraction_static = args.GetFloat("mem_fraction_static");
  }
  options.max_running_requests = OptionalIntArg(args, "max_running_requests");
  options.disable_radix_cache =
      args.values().contains("disable_radix_cache") && args.GetBool("disable_radix_cache");
  options.eviction_policy = *eviction_policy;
  options.weights_bytes = static_cast<uint64_t>(model->weight_bytes());
  Expected<std::unique_ptr<kv::KvMemory>> memory = kv::KvMemory::Create(options);
  if (!memory.ok()) return memory.status();

  Expected<EngineConfig> config = MakeEngineConfig(
      args, mc.context_length, static_cast<int64_t>((*memory)->max_total_num_tokens()),
      (*memory)->max_running_requests());
  if (!config.ok()) return config.status();
  Expected<std::unique_ptr<sched::Scheduler>> scheduler =
      sched::Scheduler::Create(config->sched, memory->get());
  if (!scheduler.ok()) return scheduler.status();

  RADIX_LOG_INFO(
      "max_total_num_tokens={}, chunked_prefill_size={}, max_prefill_tokens={}, "
      "max_running_requests={}, context_len={}, available_cpu_mem={:.2f} GB",
      (*memory)->max_total_num_tokens(), config->sched.chunked_prefill_size.value_or(-1),
      config->sched.max_prefill_tokens, config->sched.max_running_requests, config->context_len,
      static_cast<double>((*memory)->sizing().available_bytes) / (1024.0 * 1024.0 * 1024.0));

  auto engine = std::make_unique<EngineLoop>(std::move(config).value(), std::move(memory).value(),
                                             std::move(scheduler).value(), std::move(model),
                                             std::move(tokenizer), pool);
  engine->Start();
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace radixserve::engine

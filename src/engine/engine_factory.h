// CreateEngine: builds one engine replica from resolved server arguments and a loaded model and
// tokenizer, and starts its engine thread.
//   * KV memory: kv::KvMemory sized by --max-total-tokens or the CPU memory rule
//     (kv/memory_sizing.h) against the model's geometry; --page-size (null: 1);
//     --kv-cache-dtype auto/float32 (the model reads a float32 KV cache; other dtypes are
//     kUnsupported); --disable-radix-cache; --radix-eviction-policy.
//   * Limits: max_running_requests and context_len as SGLang derives them; logs SGLang's
//     "max_total_num_tokens=..., chunked_prefill_size=..., ..." startup line.
// The model, tokenizer (may be null: token ids only) and thread pool are shared, read-only (the
// pool is used by the engine thread only) and must outlive the engine.
#pragma once

#include <memory>

#include "args/server_args.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "engine/engine.h"
#include "model/causal_lm.h"
#include "tokenizer/tokenizer.h"

namespace radixserve::engine {

Expected<std::unique_ptr<Engine>> CreateEngine(
    const args::ServerArgs& args, std::shared_ptr<const model::CausalLM> model,
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer, ThreadPool* pool);

}  // namespace radixserve::engine

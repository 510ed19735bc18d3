// CreateEngine: builds the engine from resolved server arguments and a loaded model and
// tokenizer, and starts its engine thread(s). With --dp-size N > 1 it builds N replicas behind
// a DpEngine (dp_engine.h): each gets --threads / N threads (at least 1) in a pool of its own
// (`pool` itself is then unused), 1/N of the KV budget (kv/memory_sizing.h; also
// --max-total-tokens / N) and its own scheduler; --load-balance-method picks the replica of
// each request. Per replica:
//   * KV memory: kv::KvMemory sized by --max-total-tokens or the CPU memory rule
//     (kv/memory_sizing.h) against the model's geometry; --page-size (null: 1);
//     --kv-cache-dtype auto/float32 (the model reads a float32 KV cache; other dtypes are
//     kUnsupported); --disable-radix-cache; --radix-eviction-policy.
//   * Limits: max_running_requests and context_len as SGLang derives them; logs SGLang's
//     "max_total_num_tokens=..., chunked_prefill_size=..., ..." startup line.
//   * Watchdog: --watchdog-timeout / --soft-watchdog-timeout (watchdog.h).
//   * Speculative decoding: --speculative-algorithm NGRAM builds each replica's n-gram table;
//     STANDALONE needs `draft_model` (loaded from --speculative-draft-model-path, same
//     vocabulary size, else kInvalidArgument), whose KV gets a storage of its own beside the
//     pool, counted in the sizing (kv::KvMemoryOptions::draft).
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
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer, ThreadPool* pool,
    std::shared_ptr<const model::CausalLM> draft_model = nullptr);

}  // namespace radixserve::engine

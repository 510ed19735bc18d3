// LoraRegistry: the LoRA adapters a server holds, by name (SGLang's LoRARegistry and its
// --max-loaded-loras eviction). Adapters load from --lora-paths at startup and from
// POST /load_lora_adapter at run time; requests resolve a name to a LoraRef once, when they are
// built, and keep the adapter alive through its shared_ptr, so unloading (or evicting) an adapter
// never changes a request in flight: it only stops new requests from naming it.
//
// Every load gets a new id, never reused; the engine keys the prefix cache by it, so prompts under
// two adapters (or two loads of one name) share nothing.
//
// Thread-safe: HTTP threads load, unload and resolve concurrently. Load reads the files outside
// the lock (a slow load does not stall requests resolving other adapters).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/causal_lm.h"
#include "model/lora_adapter.h"

namespace radixserve::engine {

struct LoraRef {
  std::string name;
  std::string path;
  bool pinned = false;  // never evicted by --max-loaded-loras
  uint64_t id = 0;      // unique per load
  std::shared_ptr<const model::LoraAdapter> adapter;
};

struct LoraRegistryOptions {
  int64_t max_loaded = 0;       // --max-loaded-loras; 0: no cap
  bool evict_fifo = false;      // --lora-eviction-policy fifo (else lru)
  int64_t max_bytes = -1;       // RTP-LLM --max-lora-model-size; -1: no cap
  model::LoraLoadOptions load;  // --max-lora-rank, --lora-target-modules
};

class LoraRegistry {
 public:
  LoraRegistry(std::shared_ptr<const model::CausalLM> model, LoraRegistryOptions options)
      : model_(std::move(model)), options_(std::move(options)) {}

  // Adapters loaded from now on are read for `model` (a weight update swapped in a model of the
  // same architecture; adapters already loaded stay valid).
  void SetModel(std::shared_ptr<const model::CausalLM> model);

  // Loads `path` as `name`. A name already loaded, an unreadable or incompatible adapter, or a
  // full registry with nothing evictable is an error. Past --max-loaded-loras the least recently
  // used (or first loaded) unpinned adapters are unloaded; their names go to `evicted`.
  Status Load(const std::string& name, const std::string& path, bool pinned,
              std::vector<std::string>* evicted = nullptr);
  Status Unload(const std::string& name);
  // The adapter named `name` (marked used for LRU), or nullopt.
  std::optional<LoraRef> Find(const std::string& name);
  // Loaded adapters in load order.
  std::vector<LoraRef> List() const;

 private:
  std::shared_ptr<const model::CausalLM> model_;  // guarded by mutex_
  LoraRegistryOptions options_;
  mutable std::mutex mutex_;
  std::list<LoraRef> loaded_;      // load order; Find moves an entry to the back under LRU
  std::set<std::string> loading_;  // names being read from disk
  uint64_t next_id_ = 1;
};

// SGLang's --lora-paths forms: "PATH" (named after the path), "NAME=PATH", or a JSON object
// {"lora_name": ..., "lora_path": ..., "pinned": bool}.
struct LoraPathSpec {
  std::string name, path;
  bool pinned = false;
};
Expected<LoraPathSpec> ParseLoraPathSpec(const std::string& text);

// --lora-target-modules values to targets: q_proj ... down_proj, qkv_proj and gate_up_proj (their
// groups), "all" (empty: everything).
Expected<std::vector<model::LoraTarget>> ParseLoraTargets(const std::vector<std::string>& names);

}  // namespace radixserve::engine

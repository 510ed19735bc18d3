// GrammarCache: compiled grammars by constraint, so that a schema sent by many requests is compiled
// once (SGLang keeps such a cache in its grammar backend). Keyed by (kind, text) -- the compiler
// options are fixed for the cache's lifetime. Bounded: at most `capacity` grammars, the least
// recently used dropped first (requests still holding one keep it alive through their shared_ptr).
// Failed compilations are not cached.
//
// Thread affinity: Get and Find may be called from any thread at once (the API layer looks up on
// HTTP threads and compiles misses on its grammar queue, never on the engine thread). Compilation
// runs outside the lock, so one slow schema does not hold up other requests; two threads missing
// on the same key at once both compile it and the first insert wins.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/status.h"
#include "sampling/compiled_grammar.h"
#include "sampling/grammar_compiler.h"

namespace radixserve::sampling {

class GrammarCache {
 public:
  using CompileFn =
      std::function<Expected<std::shared_ptr<const CompiledGrammar>>(const GrammarSpec&)>;

  // Default bound: a few hundred compiled grammars (each holds llguidance's parser tables and
  // lexer caches, from kilobytes for a regex to megabytes for a large schema).
  static constexpr size_t kDefaultCapacity = 256;

  // Compiles with `compiler`, which must outlive the cache.
  explicit GrammarCache(const GrammarCompiler& compiler, size_t capacity = kDefaultCapacity);
  // Compiles with `compile` (tests count calls through it).
  GrammarCache(CompileFn compile, size_t capacity);

  // The compiled grammar for `spec`, from the cache or compiled now. Errors are the compiler's
  // (kInvalidArgument naming the problem).
  Expected<std::shared_ptr<const CompiledGrammar>> Get(const GrammarSpec& spec);
  // The cached grammar for `spec`, or null when it is not cached; never compiles (cheap enough for
  // an I/O thread, which then hands a miss to a compile queue).
  std::shared_ptr<const CompiledGrammar> Find(const GrammarSpec& spec);

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;  // compilations attempted (failed ones included)
    size_t size = 0;
  };
  Stats stats() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const CompiledGrammar> grammar;
  };
  static std::string Key(const GrammarSpec& spec);

  CompileFn compile_;
  size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace radixserve::sampling

#include "sampling/grammar_cache.h"

#include "common/check.h"

namespace radixserve::sampling {

GrammarCache::GrammarCache(const GrammarCompiler& compiler, size_t capacity)
    : GrammarCache([&compiler](const GrammarSpec& spec) { return compiler.Compile(spec); },
                   capacity) {}

GrammarCache::GrammarCache(CompileFn compile, size_t capacity)
    : compile_(std::move(compile)), capacity_(capacity) {
  RADIX_CHECK(capacity_ > 0);
}

std::string GrammarCache::Key(const GrammarSpec& spec) {
  // The kind's name cannot contain the separator, so distinct (kind, text) pairs never collide.
  std::string key(GrammarKindName(spec.kind));
  key += '\n';
  key += spec.text;
  return key;
}

Expected<std::shared_ptr<const CompiledGrammar>> GrammarCache::Get(const GrammarSpec& spec) {
  std::string key = Key(spec);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->grammar;
    }
    ++misses_;
  }
  RADIX_ASSIGN_OR_RETURN(auto compiled, compile_(spec));
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = index_.find(key); it != index_.end()) {
    // Another thread compiled the same constraint meanwhile; share its grammar.
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->grammar;
  }
  lru_.push_front(Entry{key, compiled});
  index_.emplace(std::move(key), lru_.begin());
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
  return compiled;
}

std::shared_ptr<const CompiledGrammar> GrammarCache::Find(const GrammarSpec& spec) {
  std::string key = Key(spec);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  ++hits_;
  return it->second->grammar;
}

GrammarCache::Stats GrammarCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return Stats{hits_, misses_, lru_.size()};
}

}  // namespace radixserve::sampling

#include "kv/leak_check.h"

#include <string>
#include <vector>

namespace radixserve::kv {

namespace {

constexpr size_t kMaxListed = 8;

std::string ListPages(const std::vector<size_t>& pages) {
  std::string out;
  for (size_t i = 0; i < pages.size() && i < kMaxListed; ++i) {
    out += (i == 0 ? "" : ", ") + std::to_string(pages[i]);
  }
  if (pages.size() > kMaxListed) out += ", ... (" + std::to_string(pages.size()) + " in all)";
  return out;
}

}  // namespace

Status CheckKvLeak(const TokenToKVPool& pool, const PrefixCache& cache,
                   const ReqToTokenPool* req_pool) {
  const std::string counts = "available_size=" + std::to_string(pool.available_size()) +
                             ", evictable_size=" + std::to_string(cache.EvictableSize()) +
                             ", protected_size=" + std::to_string(cache.ProtectedSize()) +
                             ", total=" + std::to_string(pool.size());

  std::vector<int32_t> cached_slots;
  cache.CollectCachedSlots(&cached_slots);
  const size_t page_size = static_cast<size_t>(pool.page_size());
  std::vector<uint32_t> cached_per_page(pool.num_pages() + 1, 0);
  std::vector<size_t> out_of_range;
  for (int32_t slot : cached_slots) {
    const size_t page = static_cast<size_t>(slot) / page_size;
    if (slot < 0 || page == 0 || page > pool.num_pages()) {
      out_of_range.push_back(static_cast<size_t>(slot));
      continue;
    }
    ++cached_per_page[page];
  }

  std::vector<size_t> leaked, cached_and_free, cached_twice;
  for (size_t page = 1; page <= pool.num_pages(); ++page) {
    const uint32_t held = cached_per_page[page];
    if (pool.IsPageFree(page)) {
      if (held > 0) cached_and_free.push_back(page);
    } else if (held == 0) {
      leaked.push_back(page);
    } else if (held > page_size) {
      cached_twice.push_back(page);
    }
  }

  std::string problems;
  if (cache.ProtectedSize() != 0) problems += "; cached tokens are still locked while idle";
  if (pool.available_size() + cache.TotalSize() != pool.size()) {
    problems += "; free + cached != total";
  }
  if (!leaked.empty()) problems += "; leaked pages (neither free nor cached): " + ListPages(leaked);
  if (!cached_and_free.empty()) {
    problems += "; pages both cached and free: " + ListPages(cached_and_free);
  }
  if (!cached_twice.empty()) {
    problems += "; pages cached more than once: " + ListPages(cached_twice);
  }
  if (!out_of_range.empty()) {
    problems += "; cached slots outside the pool: " + ListPages(out_of_range);
  }
  if (req_pool != nullptr && req_pool->available_size() != req_pool->size()) {
    problems += "; " + std::to_string(req_pool->size() - req_pool->available_size()) +
                " request slots still allocated";
  }
  if (problems.empty()) return Status::Ok();
  return Internal("KV cache pool leak detected (" + counts + ")" + problems);
}

}  // namespace radixserve::kv

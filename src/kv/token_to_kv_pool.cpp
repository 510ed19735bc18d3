#include "kv/token_to_kv_pool.h"

#include <algorithm>
#include <string>

#include "common/log.h"

namespace radixserve::kv {

namespace {

size_t CeilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

Status OutOfSlots(size_t needed_tokens, size_t available_tokens) {
  return Status(StatusCode::kResourceExhausted,
                "KV cache out of memory: need " + std::to_string(needed_tokens) + " token slots, " +
                    std::to_string(available_tokens) + " available");
}

}  // namespace

Expected<TokenToKVPool> TokenToKVPool::Create(const TokenToKVPoolOptions& options) {
  if (options.page_size < 1) return InvalidArgument("page_size must be at least 1");
  if (options.size % static_cast<size_t>(options.page_size) != 0) {
    return InvalidArgument("KV pool size " + std::to_string(options.size) +
                           " is not a multiple of page_size " + std::to_string(options.page_size));
  }
  const size_t num_pages = options.size / options.page_size;
  KvStorageSpec spec{options.num_layers,
                     options.kv_heads,
                     options.head_dim,
                     options.dtype,
                     options.size + static_cast<size_t>(options.page_size),
                     options.scales,
                     options.values_in_keys};
  RADIX_ASSIGN_OR_RETURN(KvStorage storage, KvStorage::Create(spec));
  if (options.num_layers > 0) {
    const double gb = static_cast<double>(storage.k_bytes()) / (1 << 30);
    const double v_gb = options.values_in_keys ? 0.0 : gb;
    RADIX_LOG_INFO(
        "KV Cache is allocated. #tokens: {}, K size: {:.2f} GB, V size: {:.2f} GB, dtype: {}{}",
        options.size, gb, v_gb, KvDtypeName(options.dtype),
        !IsFp8(options.dtype)      ? ""
        : options.scales.k.empty() ? " (scales 1.0)"
                                   : " (per-layer scales from --quantization-param-path)");
  }
  return TokenToKVPool(num_pages, options.page_size, std::move(storage));
}

TokenToKVPool::TokenToKVPool(size_t num_pages, int32_t page_size, KvStorage storage)
    : num_pages_(num_pages),
      page_size_(page_size),
      page_generation_(num_pages + 1, 0),
      storage_(std::move(storage)) {
  Clear();
}

void TokenToKVPool::Clear() {
  free_pages_.clear();
  page_free_.assign(num_pages_ + 1, 1);
  page_free_[0] = 0;
  for (size_t page = 1; page <= num_pages_; ++page) {
    free_pages_.push_back(static_cast<int32_t>(page));
  }
}

bool TokenToKVPool::IsPageFree(size_t page) const {
  return page < page_free_.size() && page_free_[page] != 0;
}

void TokenToKVPool::PushFreePage(int32_t page) {
  RADIX_CHECK_MSG(page >= 1 && static_cast<size_t>(page) <= num_pages_,
                  "freeing a KV slot outside the pool (or the reserved page 0)");
  RADIX_CHECK_MSG(page_free_[page] == 0, "double free of a KV page");
  page_free_[page] = 1;
  free_pages_.push_front(page);
}

int32_t TokenToKVPool::PopFreePage() {
  RADIX_CHECK(!free_pages_.empty());
  const int32_t page = free_pages_.front();
  free_pages_.pop_front();
  page_free_[page] = 0;
  ++page_generation_[page];
  return page;
}

Expected<std::vector<int32_t>> TokenToKVPool::Alloc(size_t num_tokens) {
  RADIX_CHECK_MSG(num_tokens % page_size_ == 0, "Alloc takes whole pages");
  const size_t pages = num_tokens / page_size_;
  if (pages > free_pages_.size()) return OutOfSlots(num_tokens, available_size());
  std::vector<int32_t> slots;
  slots.reserve(num_tokens);
  for (size_t i = 0; i < pages; ++i) {
    const int32_t first = PopFreePage() * page_size_;
    for (int32_t offset = 0; offset < page_size_; ++offset) slots.push_back(first + offset);
  }
  return slots;
}

size_t TokenToKVPool::PagesNeeded(std::span<const ExtendSpec> specs) const {
  size_t pages = 0;
  for (const ExtendSpec& spec : specs) {
    RADIX_CHECK(spec.seq_len >= spec.prefix_len);
    pages += CeilDiv(spec.seq_len, page_size_) - CeilDiv(spec.prefix_len, page_size_);
  }
  return pages;
}

Expected<std::vector<int32_t>> TokenToKVPool::AllocExtend(std::span<const ExtendSpec> specs) {
  const size_t pages = PagesNeeded(specs);
  if (pages > free_pages_.size()) return OutOfSlots(pages * page_size_, available_size());
  std::vector<int32_t> slots;
  for (const ExtendSpec& spec : specs) {
    size_t pos = spec.prefix_len;
    if (pos % page_size_ != 0 && pos < spec.seq_len) {
      // Continue the partly filled last page of the prefix.
      const auto last_offset = static_cast<size_t>((spec.last_loc + 1) % page_size_);
      RADIX_CHECK_MSG(spec.last_loc > 0 && last_offset == pos % page_size_,
                      "last_loc does not match prefix_len's page offset");
      RADIX_CHECK(page_free_[spec.last_loc / page_size_] == 0);
      int32_t slot = spec.last_loc + 1;
      while (pos % page_size_ != 0 && pos < spec.seq_len) {
        slots.push_back(slot++);
        ++pos;
      }
    }
    while (pos < spec.seq_len) {
      const int32_t first = PopFreePage() * page_size_;
      for (int32_t offset = 0; offset < page_size_ && pos < spec.seq_len; ++offset, ++pos) {
        slots.push_back(first + offset);
      }
    }
  }
  return slots;
}

void TokenToKVPool::Free(std::span<const int32_t> slots) {
  if (slots.empty()) return;
  std::vector<int32_t> pages;
  pages.reserve(slots.size() / page_size_ + 1);
  for (int32_t slot : slots) {
    RADIX_CHECK_MSG(slot >= 0, "freeing a negative KV slot");
    const int32_t page = slot / page_size_;
    if (pages.empty() || pages.back() != page) pages.push_back(page);
  }
  std::sort(pages.begin(), pages.end());
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  // Push in reverse so that, after prepending, the lowest page is handed out first.
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) PushFreePage(*it);
}

}  // namespace radixserve::kv

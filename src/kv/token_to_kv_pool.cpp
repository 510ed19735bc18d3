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
      pages_per_run_(std::max(1, kRunSlots / page_size)),
      page_generation_(num_pages + 1, 0),
      storage_(std::move(storage)) {
  Clear();
}

size_t TokenToKVPool::RunCapacity(size_t run) const {
  const size_t first = RunFirst(run);
  const size_t end = std::min((run + 1) * static_cast<size_t>(pages_per_run_), num_pages_ + 1);
  return end > first ? end - first : 0;
}

void TokenToKVPool::Clear() {
  page_free_.assign(num_pages_ + 1, 1);
  page_free_[0] = 0;
  free_page_count_ = num_pages_;
  const size_t runs = RunOf(num_pages_) + 1;
  run_free_.assign(runs, 0);
  free_runs_.clear();
  for (size_t run = 0; run < runs; ++run) {
    run_free_[run] = static_cast<int32_t>(RunCapacity(run));
    if (run_free_[run] > 0) free_runs_.push_back(static_cast<int32_t>(run));
  }
  scan_run_ = 0;
}

bool TokenToKVPool::IsPageFree(size_t page) const {
  return page < page_free_.size() && page_free_[page] != 0;
}

void TokenToKVPool::TakePage(size_t page, int32_t* slots_out) {
  RADIX_CHECK(page_free_[page] != 0);
  page_free_[page] = 0;
  --run_free_[RunOf(page)];
  --free_page_count_;
  ++page_generation_[page];
  const auto first = static_cast<int32_t>(page) * page_size_;
  for (int32_t offset = 0; offset < page_size_; ++offset) slots_out[offset] = first + offset;
}

void TokenToKVPool::TakePages(size_t pages, size_t last_page, std::vector<int32_t>& slots) {
  RADIX_CHECK(pages <= free_page_count_);
  auto take = [&](size_t p) {
    slots.resize(slots.size() + static_cast<size_t>(page_size_));
    TakePage(p, slots.data() + slots.size() - page_size_);
    --pages;
  };
  // The run's free pages in order, while any are wanted.
  auto take_run = [&](size_t run) {
    const size_t first = RunFirst(run);
    for (size_t p = first; pages > 0 && p < first + RunCapacity(run); ++p) {
      if (page_free_[p]) take(p);
    }
  };
  // Continue the sequence's run (its last page is held, so the run is not wholly free).
  if (last_page != 0 && page_free_[last_page] == 0) {
    const size_t run = RunOf(last_page);
    for (size_t p = last_page + 1; pages > 0 && p <= num_pages_ && RunOf(p) == run && page_free_[p];
         ++p) {
      take(p);
    }
  }
  // Then wholly free runs, in order; the last one's remaining pages stay free after the sequence.
  while (pages > 0 && !free_runs_.empty()) {
    const auto run = static_cast<size_t>(free_runs_.front());
    free_runs_.pop_front();
    RADIX_CHECK(static_cast<size_t>(run_free_[run]) == RunCapacity(run));
    take_run(run);
  }
  // Then free pages wherever they are (only partly free runs are left).
  while (pages > 0) {
    if (run_free_[scan_run_] > 0) take_run(scan_run_);
    if (pages > 0) scan_run_ = (scan_run_ + 1) % run_free_.size();
  }
}

Expected<std::vector<int32_t>> TokenToKVPool::Alloc(size_t num_tokens) {
  RADIX_CHECK_MSG(num_tokens % page_size_ == 0, "Alloc takes whole pages");
  const size_t pages = num_tokens / page_size_;
  if (pages > free_page_count_) return OutOfSlots(num_tokens, available_size());
  std::vector<int32_t> slots;
  slots.reserve(num_tokens);
  TakePages(pages, 0, slots);
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
  if (pages > free_page_count_) return OutOfSlots(pages * page_size_, available_size());
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
    if (pos < spec.seq_len) {
      const size_t last_page = spec.prefix_len > 0 && spec.last_loc >= page_size_
                                   ? static_cast<size_t>(spec.last_loc / page_size_)
                                   : 0;
      const size_t before = slots.size();
      TakePages(CeilDiv(spec.seq_len - pos, page_size_), last_page, slots);
      // The last page's slots past seq_len stay with it, for the sequence's next extension.
      slots.resize(before + (spec.seq_len - pos));
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
  std::vector<int32_t> whole_runs;
  for (int32_t page : pages) {
    RADIX_CHECK_MSG(page >= 1 && static_cast<size_t>(page) <= num_pages_,
                    "freeing a KV slot outside the pool (or the reserved page 0)");
    RADIX_CHECK_MSG(page_free_[page] == 0, "double free of a KV page");
    page_free_[page] = 1;
    ++free_page_count_;
    const size_t run = RunOf(static_cast<size_t>(page));
    if (static_cast<size_t>(++run_free_[run]) == RunCapacity(run)) {
      whole_runs.push_back(static_cast<int32_t>(run));
    }
  }
  // Push in reverse so that, after prepending, the lowest run is handed out first.
  for (auto it = whole_runs.rbegin(); it != whole_runs.rend(); ++it) free_runs_.push_front(*it);
}

}  // namespace radixserve::kv

// TokenToKVPool: the KV slots of one engine replica, handed out in pages of `page_size` tokens.
//
// Slot (token index) t lives in page t / page_size at offset t % page_size. Page 0 is reserved as
// SGLang's padding target and never handed out, so valid slots start at page_size and a pool of
// `size` tokens has storage rows [0, size + page_size). `size` must be a multiple of page_size.
//
// Pages are grouped into runs of kRunSlots slots (pages_per_run pages; one page when pages are
// that large). A sequence's slots stay in such runs: a new allocation takes wholly free runs
// (lowest first; freed runs return to the front, so the touched, resident part of the lazily
// mapped buffers stays small), and an extension continues into the free pages right after the
// sequence's last slot (ExtendSpec::last_loc) before it opens a new run. So the one-slot decode
// steps of many sequences do not interleave in the pool, and attention reads each sequence's
// keys and values as contiguous rows. The free pages left in a sequence's open run are no
// reservation: they count as available, and when no run is wholly free, allocation takes free
// pages wherever they are. Slot numbers are never visible to clients.
// A page is either free or allocated; freeing a slot frees its whole page, so a caller frees a
// partially used page exactly once, when it gives up all of it. Double frees and frees of
// reserved or out-of-range slots are bugs (RADIX_CHECK).
//
// Running out is an expected condition: allocation returns kResourceExhausted and changes
// nothing (all-or-nothing for a batch). Callers that want room ask the prefix cache to evict first.
//
// Thread affinity: engine thread only; not thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "common/status.h"
#include "kv/kv_storage.h"

namespace radixserve::kv {

// Slots per run (see above). Attention reads a chunk's rows in place when its slots average runs
// of 8 or more (kernels/attention.cpp), so runs of 32 pass with room for the breaks where a
// sequence's prompt and decode runs meet.
inline constexpr int32_t kRunSlots = 32;

struct TokenToKVPoolOptions {
  size_t size = 0;  // usable token slots (max_total_num_tokens); multiple of page_size
  int32_t page_size = 1;
  int32_t num_layers = 0;  // 0 layers: an allocator without buffers (for tests / planning)
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  KvDtype dtype = KvDtype::kF32;
  KvScales scales;              // fp8 only (KvStorageSpec)
  bool values_in_keys = false;  // KvStorageSpec
};

// One sequence's extension: slots for positions [prefix_len, seq_len). last_loc is the slot of
// position prefix_len - 1 (ignored when prefix_len is 0 or a page multiple): the new positions
// continue that partly filled page first.
struct ExtendSpec {
  size_t prefix_len = 0;
  size_t seq_len = 0;
  int32_t last_loc = -1;
};

class TokenToKVPool {
 public:
  static Expected<TokenToKVPool> Create(const TokenToKVPoolOptions& options);

  TokenToKVPool(TokenToKVPool&&) noexcept = default;
  TokenToKVPool& operator=(TokenToKVPool&&) noexcept = default;

  // Whole pages for num_tokens tokens (a multiple of page_size), slots in page order.
  Expected<std::vector<int32_t>> Alloc(size_t num_tokens);

  // Slots for each spec's new positions, concatenated in spec order. All or nothing. Decode is the
  // case seq_len == prefix_len + 1.
  Expected<std::vector<int32_t>> AllocExtend(std::span<const ExtendSpec> specs);

  // Pages that AllocExtend(specs) would take; lets the scheduler check before allocating.
  size_t PagesNeeded(std::span<const ExtendSpec> specs) const;

  // Frees the pages holding these slots (each page once, however many of its slots are listed).
  void Free(std::span<const int32_t> slots);

  // Marks every page free again (for /flush_cache once nothing holds a slot).
  void Clear();

  size_t size() const { return num_pages_ * page_size_; }
  size_t available_size() const { return free_page_count_ * page_size_; }
  size_t used_size() const { return size() - available_size(); }
  int32_t page_size() const { return page_size_; }
  size_t num_pages() const { return num_pages_; }  // usable pages, excluding page 0
  bool IsPageFree(size_t page) const;
  // How many times `page` has been handed out since the pool was created (0: never). A slot's
  // contents belong to the current allocation only while this is unchanged, so a companion
  // buffer indexed by slot (the draft model's KV) records it to know which of its rows are
  // current. Clear does not reset it.
  uint32_t page_generation(size_t page) const { return page_generation_[page]; }

  KvStorage& storage() { return storage_; }
  const KvStorage& storage() const { return storage_; }

 private:
  TokenToKVPool(size_t num_pages, int32_t page_size, KvStorage storage);
  size_t RunOf(size_t page) const { return page / static_cast<size_t>(pages_per_run_); }
  // The run's first usable page (run 0 lacks page 0) and how many it has.
  size_t RunFirst(size_t run) const {
    return std::max<size_t>(run * static_cast<size_t>(pages_per_run_), 1);
  }
  size_t RunCapacity(size_t run) const;
  void TakePage(size_t page, int32_t* slots_out);
  // Appends the slots of `pages` pages, taken after `last_page` in its run while they are free,
  // then from wholly free runs, then from any free page.
  void TakePages(size_t pages, size_t last_page, std::vector<int32_t>& slots);

  size_t num_pages_ = 0;
  int32_t page_size_ = 1;
  int32_t pages_per_run_ = 1;
  size_t free_page_count_ = 0;
  std::deque<int32_t> free_runs_;          // runs with every usable page free, lowest first
  std::vector<uint8_t> page_free_;         // indexed by page id; page 0 is never free
  std::vector<int32_t> run_free_;          // free pages per run
  std::vector<uint32_t> page_generation_;  // indexed by page id
  size_t scan_run_ = 0;                    // where the search for scattered free pages resumes
  KvStorage storage_;
};

}  // namespace radixserve::kv

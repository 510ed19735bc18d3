// ReqToTokenPool: the per-request slot table. Row r (a request slot) maps a sequence position to
// the KV slot (TokenToKVPool index) holding that position's K/V. Rows are handed out from a free
// list (front), and returned to its back. The table is int32, [size, row_len]; row_len is the
// context length plus a little headroom (SGLang uses context_len + 4).
//
// The table comes from calloc: large tables are mapped lazily by the C library, so only rows that
// are used become resident (4096 rows of a 32k context would otherwise cost half a gigabyte).
//
// The table does not own KV slots: whoever writes a row (the scheduler, the prefix cache) keeps
// track of which slots it must free. Running out of rows is kResourceExhausted.
//
// Thread affinity: engine thread only; the model reads rows during a forward pass the engine waits
// for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"

namespace radixserve::kv {

class ReqToTokenPool {
 public:
  // size: max concurrent requests (ReqToTokenPool size, see SGLang's max_running_requests rule);
  // row_len: positions per row.
  // The table must fit in memory (checked: a programmer error otherwise; tests use this).
  ReqToTokenPool(size_t size, size_t row_len);
  // The same, with an allocation failure reported as kResourceExhausted (sizes from arguments).
  static Expected<std::unique_ptr<ReqToTokenPool>> Create(size_t size, size_t row_len);

  // A free request slot; kResourceExhausted with SGLang's message when none is left.
  Expected<int32_t> Alloc();
  // Returns a slot obtained from Alloc. Double free is a bug.
  void Free(int32_t slot);
  // Marks every row free (flush).
  void Clear();

  // Writes values into row `slot` starting at position `start`.
  void Write(int32_t slot, size_t start, std::span<const int32_t> values);
  std::span<int32_t> Row(int32_t slot);
  std::span<const int32_t> Row(int32_t slot) const;
  // Positions [begin, end) of a row.
  std::span<const int32_t> Slice(int32_t slot, size_t begin, size_t end) const;

  size_t size() const { return size_; }
  size_t row_len() const { return row_len_; }
  size_t available_size() const { return free_slots_.size(); }
  bool IsFree(int32_t slot) const;
  // Base of the whole table (row r starts at data() + r * row_len()) for the model.
  const int32_t* data() const { return table_.get(); }

 private:
  struct FreeDeleter {
    void operator()(int32_t* table) const { std::free(table); }
  };

  size_t size_;
  size_t row_len_;
  std::unique_ptr<int32_t[], FreeDeleter> table_;

  ReqToTokenPool(size_t size, size_t row_len, int32_t* table);
  static int32_t* AllocateTable(size_t size, size_t row_len);
  std::deque<int32_t> free_slots_;
  std::vector<uint8_t> slot_free_;
};

}  // namespace radixserve::kv

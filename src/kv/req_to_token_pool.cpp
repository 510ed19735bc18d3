#include "kv/req_to_token_pool.h"

#include <algorithm>
#include <string>

namespace radixserve::kv {

int32_t* ReqToTokenPool::AllocateTable(size_t size, size_t row_len) {
  return static_cast<int32_t*>(std::calloc(std::max<size_t>(size * row_len, 1), sizeof(int32_t)));
}

ReqToTokenPool::ReqToTokenPool(size_t size, size_t row_len)
    : ReqToTokenPool(size, row_len, AllocateTable(size, row_len)) {
  RADIX_CHECK_MSG(table_ != nullptr, "cannot allocate the request-to-token table");
}

ReqToTokenPool::ReqToTokenPool(size_t size, size_t row_len, int32_t* table)
    : size_(size), row_len_(row_len), table_(table) {
  if (table_ != nullptr) Clear();
}

Expected<std::unique_ptr<ReqToTokenPool>> ReqToTokenPool::Create(size_t size, size_t row_len) {
  int32_t* table = AllocateTable(size, row_len);
  if (table == nullptr) {
    return Status(StatusCode::kResourceExhausted, "cannot allocate the request-to-token table of " +
                                                      std::to_string(size) + " rows x " +
                                                      std::to_string(row_len) + " positions");
  }
  return std::unique_ptr<ReqToTokenPool>(new ReqToTokenPool(size, row_len, table));
}

void ReqToTokenPool::Clear() {
  free_slots_.clear();
  for (size_t slot = 0; slot < size_; ++slot) free_slots_.push_back(static_cast<int32_t>(slot));
  slot_free_.assign(size_, 1);
}

Expected<int32_t> ReqToTokenPool::Alloc() {
  if (free_slots_.empty()) {
    return Status(StatusCode::kResourceExhausted,
                  "alloc_req_slots runs out of memory. Please set a smaller number for "
                  "`--max-running-requests`.");
  }
  const int32_t slot = free_slots_.front();
  free_slots_.pop_front();
  slot_free_[slot] = 0;
  return slot;
}

void ReqToTokenPool::Free(int32_t slot) {
  RADIX_CHECK_MSG(slot >= 0 && static_cast<size_t>(slot) < size_, "request slot out of range");
  RADIX_CHECK_MSG(slot_free_[slot] == 0, "double free of a request slot");
  slot_free_[slot] = 1;
  free_slots_.push_back(slot);
}

bool ReqToTokenPool::IsFree(int32_t slot) const {
  return slot >= 0 && static_cast<size_t>(slot) < size_ && slot_free_[slot] != 0;
}

void ReqToTokenPool::Write(int32_t slot, size_t start, std::span<const int32_t> values) {
  RADIX_CHECK(start + values.size() <= row_len_);
  std::span<int32_t> row = Row(slot);
  std::copy(values.begin(), values.end(), row.begin() + static_cast<ptrdiff_t>(start));
}

std::span<int32_t> ReqToTokenPool::Row(int32_t slot) {
  RADIX_CHECK(slot >= 0 && static_cast<size_t>(slot) < size_);
  return {table_.get() + static_cast<size_t>(slot) * row_len_, row_len_};
}

std::span<const int32_t> ReqToTokenPool::Row(int32_t slot) const {
  RADIX_CHECK(slot >= 0 && static_cast<size_t>(slot) < size_);
  return {table_.get() + static_cast<size_t>(slot) * row_len_, row_len_};
}

std::span<const int32_t> ReqToTokenPool::Slice(int32_t slot, size_t begin, size_t end) const {
  RADIX_CHECK(begin <= end && end <= row_len_);
  return Row(slot).subspan(begin, end - begin);
}

}  // namespace radixserve::kv

#include "api/response_store.h"

#include <algorithm>

namespace radixserve::api {

ResponseStore::ResponseStore(size_t max_entries, size_t max_bytes)
    : max_entries_(max_entries), max_bytes_(max_bytes) {}

void ResponseStore::Put(const std::string& id, StoredResponse entry) {
  const size_t size = id.size() + entry.response.dump().size() + entry.messages.dump().size() +
                      entry.input_items.dump().size();
  std::lock_guard lock(mu_);
  if (auto it = slots_.find(id); it != slots_.end()) {
    bytes_ -= it->second.bytes;
    slots_.erase(it);
  }
  if (size > max_bytes_ || max_entries_ == 0) return;
  const uint64_t serial = next_serial_++;
  slots_.emplace(id, Slot{std::move(entry), size, serial});
  order_.emplace_back(id, serial);
  bytes_ += size;
  EvictLocked();
}

void ResponseStore::EvictLocked() {
  while (!order_.empty() && (slots_.size() > max_entries_ || bytes_ > max_bytes_)) {
    auto [id, serial] = std::move(order_.front());
    order_.pop_front();
    auto it = slots_.find(id);
    if (it == slots_.end() || it->second.serial != serial) continue;  // replaced or erased
    bytes_ -= it->second.bytes;
    slots_.erase(it);
  }
  // Replaced and erased entries leave stale order entries behind; drop them before they
  // outnumber the live ones.
  if (order_.size() > 2 * slots_.size() + 16) {
    std::erase_if(order_, [this](const auto& entry) {
      auto it = slots_.find(entry.first);
      return it == slots_.end() || it->second.serial != entry.second;
    });
  }
}

std::optional<StoredResponse> ResponseStore::Get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = slots_.find(id);
  if (it == slots_.end()) return std::nullopt;
  return it->second.entry;
}

bool ResponseStore::Erase(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(id);
  if (it == slots_.end()) return false;
  bytes_ -= it->second.bytes;
  slots_.erase(it);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return slots_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace radixserve::api

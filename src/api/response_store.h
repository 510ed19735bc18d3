// The responses /v1/responses keeps (OpenAI's `store`, on by default): what GET
// /v1/responses/{id} returns and what a later request continues with previous_response_id. Held in
// memory only, so a restart forgets them; the oldest go first once the store passes its count or
// byte bound, as a cache would.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace radixserve::api {

struct StoredResponse {
  nlohmann::json response;  // the Response object as answered
  // The conversation so far in chat form (instructions excluded, as OpenAI does not carry them
  // over), ending with this response's assistant turn: what previous_response_id continues.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::json input_items = nlohmann::json::array();  // GET /v1/responses/{id}/input_items
};

class ResponseStore {
 public:
  ResponseStore(size_t max_entries, size_t max_bytes);

  // Keeps `entry` under `id` (replacing one with the same id), then drops the oldest entries
  // while the store is over either bound. An entry larger than max_bytes is not kept.
  void Put(const std::string& id, StoredResponse entry);
  std::optional<StoredResponse> Get(const std::string& id) const;
  // False when there was no such entry.
  bool Erase(const std::string& id);

  size_t size() const;
  size_t bytes() const;

 private:
  struct Slot {
    StoredResponse entry;
    size_t bytes = 0;
    uint64_t serial = 0;  // which put this is, to skip stale order entries
  };

  void EvictLocked();

  const size_t max_entries_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Slot> slots_;
  std::deque<std::pair<std::string, uint64_t>> order_;  // oldest first
  size_t bytes_ = 0;
  uint64_t next_serial_ = 0;
};

}  // namespace radixserve::api

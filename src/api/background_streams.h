// The event streams of background Responses created with stream: true (OpenAI's resumable
// background streaming). Every event the call emits is kept in order, so that the creating
// request streams them live and GET /v1/responses/{id}?stream=true&starting_after=N replays the
// events after sequence number N and then follows the rest; the client going away ends only its
// own stream, never the response. A finished stream stays readable until it is evicted: the
// oldest finished ones go first once more than max_streams are kept or their events pass
// max_bytes (unfinished streams are never evicted).
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api/response_writer.h"

namespace radixserve::api {

class EventLog {
 public:
  // One event: its name ("event:" line; empty: none) and data. Event i has sequence number i.
  void Append(std::string name, std::string data);
  // The call ended: every subscriber's stream ends; later subscribers get the replay and the end.
  void Close();
  // Starts writer's event stream with the events after sequence number `after` (-1: all), then
  // forwards the new ones until Close.
  void Subscribe(int64_t after, ResponseWriterPtr writer);

  bool closed() const;
  size_t bytes() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> events_;
  std::vector<ResponseWriterPtr> subscribers_;
  size_t bytes_ = 0;
  bool closed_ = false;
};

class BackgroundStreams {
 public:
  BackgroundStreams(size_t max_streams, size_t max_bytes)
      : max_streams_(max_streams), max_bytes_(max_bytes) {}

  // A new log under `id` (replacing one with that id), after evicting finished ones over the
  // bounds.
  std::shared_ptr<EventLog> Create(const std::string& id);
  // The log of `id`, or null.
  std::shared_ptr<EventLog> Find(const std::string& id) const;
  size_t size() const;

 private:
  void EvictLocked();

  const size_t max_streams_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<EventLog>> logs_;
  std::deque<std::string> order_;  // oldest first
};

}  // namespace radixserve::api

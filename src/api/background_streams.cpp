#include "api/background_streams.h"

#include <algorithm>

namespace radixserve::api {

void EventLog::Append(std::string name, std::string data) {
  std::lock_guard lock(mu_);
  if (closed_) return;
  for (const ResponseWriterPtr& writer : subscribers_) {
    if (name.empty()) {
      writer->SendEvent(data);
    } else {
      writer->SendNamedEvent(name, data);
    }
  }
  bytes_ += name.size() + data.size();
  events_.emplace_back(std::move(name), std::move(data));
}

void EventLog::Close() {
  std::lock_guard lock(mu_);
  if (closed_) return;
  closed_ = true;
  for (const ResponseWriterPtr& writer : subscribers_) writer->EndStream();
  subscribers_.clear();
}

void EventLog::Subscribe(int64_t after, ResponseWriterPtr writer) {
  std::lock_guard lock(mu_);
  writer->StartStream();
  const size_t first = after < 0 ? 0 : static_cast<size_t>(after) + 1;
  for (size_t i = first; i < events_.size(); ++i) {
    const auto& [name, data] = events_[i];
    if (name.empty()) {
      writer->SendEvent(data);
    } else {
      writer->SendNamedEvent(name, data);
    }
  }
  if (closed_) {
    writer->EndStream();
  } else {
    subscribers_.push_back(std::move(writer));
  }
}

bool EventLog::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

size_t EventLog::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

std::shared_ptr<EventLog> BackgroundStreams::Create(const std::string& id) {
  std::lock_guard lock(mu_);
  auto log = std::make_shared<EventLog>();
  if (logs_.count(id) == 0) order_.push_back(id);
  logs_[id] = log;
  EvictLocked();
  return log;
}

std::shared_ptr<EventLog> BackgroundStreams::Find(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = logs_.find(id);
  return it == logs_.end() ? nullptr : it->second;
}

size_t BackgroundStreams::size() const {
  std::lock_guard lock(mu_);
  return logs_.size();
}

void BackgroundStreams::EvictLocked() {
  size_t bytes = 0;
  for (const auto& [id, log] : logs_) bytes += log->bytes();
  for (auto it = order_.begin();
       it != order_.end() && (logs_.size() > max_streams_ || bytes > max_bytes_);) {
    auto found = logs_.find(*it);
    if (!found->second->closed()) {
      ++it;
      continue;
    }
    bytes -= found->second->bytes();
    logs_.erase(found);
    it = order_.erase(it);
  }
}

}  // namespace radixserve::api

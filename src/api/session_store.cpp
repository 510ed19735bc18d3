#include "api/session_store.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "common/log.h"

namespace radixserve::api {
namespace {

// A 32-hex-digit id, as uuid4().hex looks.
std::string RandomHexId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:016x}{:016x}", rng(), rng());
}

// Python's seq[:offset] length for a sequence of `size`.
size_t SliceEnd(int64_t offset, size_t size) {
  const auto n = static_cast<int64_t>(size);
  const int64_t end = offset < 0 ? std::max<int64_t>(0, n + offset) : std::min(offset, n);
  return static_cast<size_t>(end);
}

}  // namespace

Expected<std::string> SessionStore::Open(const SessionOpenOptions& options) {
  std::lock_guard lock(mu_);
  ReapLocked(Clock::now());
  std::string id = options.id.value_or(RandomHexId());
  if (sessions_.count(id) != 0) {
    return InvalidArgument(
        "Failed to open the session. Check if a session with the same id is still open.");
  }
  Session& session = sessions_[id];
  session.capacity_of_str_len = options.capacity_of_str_len;
  session.streaming = options.streaming;
  session.timeout_s = options.timeout_s;
  RADIX_LOG_INFO("Session opened: {} (active={})", id, sessions_.size());
  return id;
}

std::vector<std::string> SessionStore::Close(std::string_view id) {
  std::lock_guard lock(mu_);
  std::vector<std::string> running;
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    RADIX_LOG_WARN("session id {} does not exist, cannot delete.", id);
    return running;
  }
  Session& session = it->second;
  if (session.streaming && session.inflight) {
    session.close_on_finish = true;  // closed when its request ends
    return running;
  }
  for (const auto& [rid, node] : session.nodes) {
    if (!node.finished) running.push_back(rid);
  }
  sessions_.erase(it);
  RADIX_LOG_INFO("Session closed: {} (active={})", id, sessions_.size());
  return running;
}

void SessionStore::Clear(Session& session, const std::string& rid,
                         std::vector<std::string>* aborted) {
  auto it = session.nodes.find(rid);
  if (it == session.nodes.end()) return;
  const std::vector<std::string> children = it->second.children;
  for (const std::string& child : children) Clear(session, child, aborted);
  it = session.nodes.find(rid);
  if (!it->second.finished) aborted->push_back(rid);
  if (it->second.parent) {
    auto parent = session.nodes.find(*it->second.parent);
    if (parent != session.nodes.end()) {
      auto& siblings = parent->second.children;
      siblings.erase(std::remove(siblings.begin(), siblings.end(), rid), siblings.end());
    }
  }
  session.nodes.erase(it);
}

Expected<SessionTurn> SessionStore::Begin(const SessionParams& params, const std::string& rid,
                                          std::vector<int32_t> input_ids,
                                          std::optional<int32_t> bos) {
  std::lock_guard lock(mu_);
  const Clock::time_point now = Clock::now();
  ReapLocked(now);
  auto found = sessions_.find(params.id);
  if (found == sessions_.end()) {
    return InvalidArgument(fmt::format("Invalid request: session id {} does not exist", params.id));
  }
  Session& session = found->second;
  if (session.close_on_finish) {
    return InvalidArgument(
        fmt::format("Invalid request: close was requested for session {}", params.id));
  }
  if (!session.streaming && session.nodes.count(rid) != 0) {
    return InvalidArgument(
        fmt::format("The rid {} is already used in session {}.", rid, params.id));
  }
  SessionTurn turn;
  std::optional<std::string> last_rid;  // the request this one continues
  if (session.streaming) {
    if (session.inflight)
      return InvalidArgument("Streaming session already has an active request.");
    if (params.replace) return InvalidArgument("Streaming sessions do not support replace.");
    if (params.drop_previous_output) {
      return InvalidArgument("Streaming sessions do not support drop_previous_output.");
    }
    if (params.offset != 0) return InvalidArgument("Streaming sessions do not support offset.");
    if (!session.nodes.empty()) last_rid = session.nodes.begin()->first;
  } else if (params.replace) {
    if (!params.rid) {
      std::vector<std::string> roots;
      for (const auto& [node_rid, node] : session.nodes) {
        if (!node.parent) roots.push_back(node_rid);
      }
      for (const std::string& root : roots) Clear(session, root, &turn.aborted);
    } else {
      auto it = session.nodes.find(*params.rid);
      if (it == session.nodes.end()) return InvalidArgument("Invalid request session id");
      if (!it->second.finished) turn.aborted.push_back(*params.rid);
      const std::vector<std::string> children = it->second.children;
      for (const std::string& child : children) Clear(session, child, &turn.aborted);
      last_rid = *params.rid;
    }
  } else if (params.rid) {
    auto it = session.nodes.find(*params.rid);
    if (it == session.nodes.end()) return InvalidArgument("Invalid request session id");
    if (!it->second.finished) {
      return InvalidArgument("Session request is appending to a request that hasn't finished.");
    }
    last_rid = *params.rid;
  }

  if (last_rid) {
    const Node& last = session.nodes.find(*last_rid)->second;
    if (bos && !input_ids.empty() && input_ids.front() == *bos) input_ids.erase(input_ids.begin());
    std::vector<int32_t> history = last.input_ids;
    if (!params.drop_previous_output) {
      history.insert(history.end(), last.output_ids.begin(), last.output_ids.end());
    }
    if (params.offset != 0) history.resize(SliceEnd(params.offset, history.size()));
    history.insert(history.end(), input_ids.begin(), input_ids.end());
    turn.input_ids = std::move(history);
  } else {
    turn.input_ids = std::move(input_ids);
  }
  if (turn.input_ids.empty()) {
    return InvalidArgument("A session request must contain input tokens after restoring history.");
  }
  session.last_active = now;
  if (session.streaming) {
    session.inflight = true;
    session.inflight_rid = rid;
    session.inflight_input = turn.input_ids;
  } else {
    Node node;
    node.input_ids = turn.input_ids;
    if (last_rid) {
      node.parent = *last_rid;
      session.nodes.find(*last_rid)->second.children.push_back(rid);
    }
    session.nodes[rid] = std::move(node);
  }
  return turn;
}

void SessionStore::Drop(std::string_view id, const std::string& rid) {
  {
    std::lock_guard lock(mu_);
    auto found = sessions_.find(id);
    if (found == sessions_.end()) return;
    if (!found->second.streaming) {
      std::vector<std::string> unfinished;  // the refused request itself; it never ran
      Clear(found->second, rid, &unfinished);
      return;
    }
  }
  Finish(id, rid, {}, /*completed=*/false);  // streaming: no node was made for it
}

void SessionStore::Finish(std::string_view id, const std::string& rid,
                          const std::vector<int32_t>& output_ids, bool completed) {
  std::lock_guard lock(mu_);
  auto found = sessions_.find(id);
  if (found == sessions_.end()) return;
  Session& session = found->second;
  if (session.streaming) {
    if (!session.inflight || session.inflight_rid != rid) return;
    session.inflight = false;
    if (completed) {
      session.nodes.clear();
      Node node;
      node.input_ids = std::move(session.inflight_input);
      node.output_ids = output_ids;
      node.finished = true;
      session.nodes[rid] = std::move(node);
    }
    session.inflight_input.clear();
    if (session.close_on_finish) {
      sessions_.erase(found);
      RADIX_LOG_INFO("Session closed: {} (active={})", id, sessions_.size());
    }
    return;
  }
  auto node = session.nodes.find(rid);
  if (node == session.nodes.end()) return;
  node->second.output_ids = output_ids;
  node->second.finished = true;
}

size_t SessionStore::size() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

void SessionStore::ReapLocked(Clock::time_point now) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    const Session& session = it->second;
    const bool timed_out =
        session.timeout_s &&
        std::chrono::duration<double>(now - session.last_active).count() > *session.timeout_s;
    if (timed_out && !session.inflight) {
      RADIX_LOG_INFO("Session {} timed out, closing.", it->first);
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace radixserve::api

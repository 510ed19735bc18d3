#include "common/work_queue.h"

#include <pthread.h>

#include "common/check.h"

namespace radixserve {

WorkQueue::WorkQueue(int threads, std::string name) : name_(std::move(name)) {
  RADIX_CHECK(threads > 0);
  for (int i = 0; i < threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
    // Linux limits thread names to 15 characters.
    pthread_setname_np(workers_.back().native_handle(), name_.substr(0, 15).c_str());
  }
}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void WorkQueue::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    RADIX_CHECK(!stopping_);
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

int64_t WorkQueue::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(tasks_.size()) + running_;
}

void WorkQueue::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, and everything posted has run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    ++running_;
    lock.unlock();
    task();
    task = nullptr;  // destroy captures outside the lock
    lock.lock();
    --running_;
  }
}

void PostOrRun(WorkQueue* queue, std::function<void()> task) {
  if (queue != nullptr) {
    queue->Post(std::move(task));
  } else {
    task();
  }
}

}  // namespace radixserve

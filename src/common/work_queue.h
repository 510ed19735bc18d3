// WorkQueue: a few worker threads that run posted tasks in posting order (FIFO), for work that
// must not run on the thread that has it (e.g. compiling a grammar off the HTTP I/O threads).
//
// Contract: Post may be called from any thread. Tasks must not throw. pending() counts tasks
// posted and not yet finished (SGLang's num_grammar_queue_reqs reads it). The destructor runs
// every task already posted, then joins the workers; Post after destruction began is a bug.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace radixserve {

class WorkQueue {
 public:
  WorkQueue(int threads, std::string name);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Post(std::function<void()> task);
  int64_t pending() const;

 private:
  void WorkerLoop();

  std::string name_;
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  int64_t running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// Posts `task` on `queue`, or runs it at once on the calling thread when there is no queue (a
// server context built without one, as in tests).
void PostOrRun(WorkQueue* queue, std::function<void()> task);

}  // namespace radixserve

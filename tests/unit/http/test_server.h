// A test HttpServer with a fixed set of routes, plus a registry where the /stream handler parks
// its Responders so a test thread can drive them (as the engine would).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "http/http_error.h"
#include "http/http_server.h"

namespace radixserve::http::testing {

class StreamRegistry {
 public:
  void Add(ResponderPtr responder) {
    responder->OnDisconnect([this] {
      std::lock_guard<std::mutex> lock(mutex_);
      ++disconnects_;
      cv_.notify_all();
    });
    std::lock_guard<std::mutex> lock(mutex_);
    responders_.push_back(std::move(responder));
    cv_.notify_all();
  }
  // Waits (bounded, only so a broken server cannot hang the test) for `n` parked responders.
  bool WaitResponders(std::size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return responders_.size() >= n; });
  }
  bool WaitDisconnects(int n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return disconnects_ >= n; });
  }
  int disconnects() {
    std::lock_guard<std::mutex> lock(mutex_);
    return disconnects_;
  }
  ResponderPtr at(std::size_t i) {
    std::lock_guard<std::mutex> lock(mutex_);
    return responders_.at(i);
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    responders_.clear();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<ResponderPtr> responders_;
  int disconnects_ = 0;
};

inline Router TestRoutes(StreamRegistry* streams) {
  Router router;
  router.Add({"GET"}, "/", [](const Request&, ResponderPtr r) {
    r->Send(200, "text/html; charset=utf-8", "<html>ui</html>");
  });
  router.Add({"GET"}, "/hello", [](const Request&, ResponderPtr r) {
    r->Send(200, "text/plain; charset=utf-8", "hello");
  });
  router.Add({"GET"}, "/health",
             [](const Request&, ResponderPtr r) { r->Send(200, "text/plain; charset=utf-8", ""); });
  router.Add({"GET"}, "/metrics", [](const Request&, ResponderPtr r) {
    r->Send(200, "text/plain; version=0.0.4", "# metrics\n");
  });
  router.Add({"POST", "PUT"}, "/echo", [](const Request& q, ResponderPtr r) {
    r->Send(200,
            q.header("content-type").has_value() ? std::string(*q.header("content-type"))
                                                 : "text/plain",
            q.body);
  });
  router.Add({"GET"}, "/query", [](const Request& q, ResponderPtr r) {
    r->Send(200, "text/plain", q.query_param("q").value_or("<none>"));
  });
  router.AddPrefix({"GET"}, "/v1/models/", [](const Request& q, ResponderPtr r) {
    r->Send(200, "text/plain", q.path_param);
  });
  router.Add({"GET"}, "/throw",
             [](const Request&, ResponderPtr) { throw std::runtime_error("boom"); });
  router.Add({"GET"}, "/silent", [](const Request&, ResponderPtr) {});
  // Parks the responder without answering: the test plays the engine.
  router.Add({"POST"}, "/stream",
             [streams](const Request&, ResponderPtr r) { streams->Add(std::move(r)); });
  return router;
}

struct TestServer {
  explicit TestServer(ServerOptions options = {}) {
    options.host = "127.0.0.1";
    options.port = 0;
    server = std::make_unique<HttpServer>(options, TestRoutes(&streams));
    Status status = server->Start();
    EXPECT_TRUE(status.ok()) << status.message();
  }
  uint16_t port() const { return server->port(); }

  StreamRegistry streams;
  std::unique_ptr<HttpServer> server;
};

}  // namespace radixserve::http::testing

// LightLLM's metrics push (--metric_gateway, --job_name, --grouping_key, --push_interval,
// --enable_monitor_auth): a thread PUTs the whole exposition text to a Prometheus Pushgateway
// the way prometheus_client's push_to_gateway does, at once and then `interval` after every
// attempt. PUT replaces every metric of the group, so the gateway always holds the last scrape.
//
// A failed push (connection, timeout, HTTP status >= 400) changes nothing for serving: it is
// logged when pushing starts failing (and when it recovers), and the next interval tries again.
// Threads: the pusher owns its thread; the body callback runs on it, so it must be thread-safe.
// The destructor stops the thread promptly, aborting a push in flight.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"

namespace radixserve::metrics {

struct PushGatewayOptions {
  // host:port, or a URL with http:// or https:// (anything else gets http:// in front).
  std::string gateway;
  std::string job = "lightllm";
  // "key=value" items; a repeated key keeps the last value.
  std::vector<std::string> grouping_key;
  std::chrono::seconds interval{10};
  std::chrono::milliseconds timeout{30'000};                      // prometheus_client's default
  std::optional<std::pair<std::string, std::string>> basic_auth;  // user, password
};

// The URL push_to_gateway PUTs to: gateway + /metrics/job/<job> + /<key>/<value> for each
// grouping key in key order, each value escaped as prometheus_client (0.26) does (quote_plus; an
// empty value, or one with '/' or a space, becomes key@base64/<URL-safe base64>). kInvalidArgument,
// naming the item, for a grouping key without exactly one '=' or with a key that is not a label
// name.
Expected<std::string> PushUrl(const PushGatewayOptions& options);

class MetricsPusher {
 public:
  // Starts pushing body() to url (PushUrl of options).
  MetricsPusher(PushGatewayOptions options, std::string url, std::function<std::string()> body);
  ~MetricsPusher();
  MetricsPusher(const MetricsPusher&) = delete;
  MetricsPusher& operator=(const MetricsPusher&) = delete;

 private:
  void Run();
  // One PUT; the error text when it failed.
  std::optional<std::string> PushOnce(const std::string& text);

  PushGatewayOptions options_;
  std::string url_;
  std::function<std::string()> body_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;                    // under mutex_
  std::atomic<bool> abort_transfer_{false};  // read by a push in flight
  std::thread thread_;
};

}  // namespace radixserve::metrics

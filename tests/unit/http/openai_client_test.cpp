// The official OpenAI Python SDK (an independent HTTP/1.1 + SSE client) against the server core:
// JSON responses, an SSE stream pushed from another thread, 401 and 404 bodies. Skipped when the
// project venv is missing (a failure under the README's test command).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../test_reference.h"
#include "http/http_server.h"

namespace radixserve::http {
namespace {

constexpr const char* kScript = R"PY(
import sys, openai
port = int(sys.argv[1])
base = f"http://127.0.0.1:{port}/v1"
c = openai.OpenAI(base_url=base, api_key="sk-test", max_retries=0, timeout=30)
print("models", ",".join(m.id for m in c.models.list().data))
s = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
print("stream", "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices))
r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
print("complete", r.choices[0].message.content, r.choices[0].finish_reason)
try:
    openai.OpenAI(base_url=base, api_key="wrong", max_retries=0, timeout=30).models.list()
except openai.AuthenticationError as e:
    print("auth", e.status_code)
try:
    c.models.retrieve("missing")
except openai.NotFoundError as e:
    print("notfound", e.status_code)
)PY";

std::string Chunk(const std::string& content, bool last) {
  std::string delta = last ? "{}" : R"({"role":"assistant","content":")" + content + "\"}";
  return R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",)"
         R"("choices":[{"index":0,"delta":)" +
         delta + R"(,"finish_reason":)" + (last ? "\"stop\"" : "null") + "}]}";
}

TEST(OpenAiClientTest, OfficialSdkTalksToServer) {
  const std::string python = testing::VenvPython();
  if (!std::filesystem::exists(python)) {
    RADIX_SKIP_WITHOUT_REFERENCE("no venv python at " + python);
  }

  std::mutex threads_mutex;
  std::vector<std::thread> engine_threads;
  Router router;
  router.Add({"GET"}, "/v1/models", [](const Request&, ResponderPtr r) {
    r->Send(200, "application/json",
            R"({"object":"list","data":[{"id":"m","object":"model","created":1,"owned_by":"x"}]})");
  });
  router.Add({"POST"}, "/v1/chat/completions", [&](const Request& q, ResponderPtr r) {
    bool stream = q.body.find("\"stream\": true") != std::string::npos ||
                  q.body.find("\"stream\":true") != std::string::npos;
    if (!stream) {
      r->Send(200, "application/json",
              R"({"id":"c2","object":"chat.completion","created":1,"model":"m",)"
              R"("choices":[{"index":0,"message":{"role":"assistant","content":"whole"},)"
              R"("finish_reason":"stop"}],)"
              R"("usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}})");
      return;
    }
    std::lock_guard<std::mutex> lock(threads_mutex);
    engine_threads.emplace_back([r] {
      r->StartStream();
      for (const char* piece : {"Hel", "lo, ", "world"}) r->SendEvent(Chunk(piece, false));
      r->SendEvent(Chunk("", true));
      r->SendEvent("[DONE]");
      r->EndStream();
    });
  });
  ServerOptions options;
  options.port = 0;
  options.api_key = "sk-test";
  HttpServer server(options, std::move(router));
  ASSERT_TRUE(server.Start().ok());

  auto script = std::filesystem::temp_directory_path() /
                ("radix_http_openai_" + std::to_string(::getpid()) + ".py");
  std::ofstream(script) << kScript;
  std::string command =
      python + " " + script.string() + " " + std::to_string(server.port()) + " 2>&1";
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), pipe)) output += buf.data();
  int rc = ::pclose(pipe);
  std::filesystem::remove(script);
  {
    std::lock_guard<std::mutex> lock(threads_mutex);
    for (auto& t : engine_threads) t.join();
  }
  EXPECT_EQ(rc, 0) << output;
  EXPECT_EQ(output, "models m\nstream Hello, world\ncomplete whole stop\nauth 401\nnotfound 404\n");
}

}  // namespace
}  // namespace radixserve::http

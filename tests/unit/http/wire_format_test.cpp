#include "http/wire_format.h"

#include <gtest/gtest.h>

namespace radixserve::http {
namespace {

TEST(WireFormatTest, Head) {
  EXPECT_EQ(FormatResponseHead(404, {{"Content-Length", "0"}}),
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(FormatResponseHead(413, {}), "HTTP/1.1 413 Payload Too Large\r\n\r\n");
}

TEST(WireFormatTest, SseAndChunks) {
  EXPECT_EQ(FormatSseEvent("{\"a\":1}"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(FormatSseEvent("[DONE]"), "data: [DONE]\n\n");
  EXPECT_EQ(FormatSseEvent("x\ny"), "data: x\ndata: y\n\n");
  EXPECT_EQ(FormatSseEvent("{\"type\":\"t\"}", "t"), "event: t\ndata: {\"type\":\"t\"}\n\n");
  EXPECT_EQ(FormatChunk(std::string(26, 'a')), "1a\r\n" + std::string(26, 'a') + "\r\n");
}

}  // namespace
}  // namespace radixserve::http

// The expected line is uvicorn's access-log format as SGLang prints it
// (`INFO:     127.0.0.1:54321 - "POST /generate HTTP/1.1" 200 OK`).
#include "http/access_log.h"

#include <gtest/gtest.h>

namespace radixserve::http {
namespace {

TEST(AccessLogTest, FormatsLikeUvicorn) {
  EXPECT_EQ(AccessLog::FormatLine("127.0.0.1:54321", "POST", "/generate", 11, 200),
            "INFO:     127.0.0.1:54321 - \"POST /generate HTTP/1.1\" 200 OK");
  EXPECT_EQ(AccessLog::FormatLine("10.0.0.2:1", "GET", "/v1/models?a=b", 10, 404),
            "INFO:     10.0.0.2:1 - \"GET /v1/models?a=b HTTP/1.0\" 404 Not Found");
}

TEST(AccessLogTest, LevelDecidesWhetherLinesAreWritten) {
  EXPECT_TRUE(AccessLog::Create("info")->enabled());
  EXPECT_TRUE(AccessLog::Create("debug")->enabled());
  EXPECT_FALSE(AccessLog::Create("warning")->enabled());
  EXPECT_FALSE(AccessLog::Create("critical")->enabled());
  EXPECT_FALSE(AccessLog().enabled());
  EXPECT_FALSE(AccessLog::Create("loud").ok());
}

}  // namespace
}  // namespace radixserve::http

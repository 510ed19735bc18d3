// Dump files are decoded by CPython's pickle module (the reference). The crash path runs in a
// gtest death-test child that receives a real fatal signal.
#include "api/crash_dump.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <csignal>
#include <filesystem>

#include "common/check.h"
#include "pickle_test_util.h"

namespace radixserve::api {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

class CrashDumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("HOSTNAME", "testhost", 1);
    folder_ = fs::temp_directory_path() /
              // No pid in the name: a "threadsafe" death test re-runs the test in a new process.
              (std::string("radix_crash_dump_") +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(folder_);
  }
  void TearDown() override { fs::remove_all(folder_); }

  // The one dump file under folder_/testhost, decoded by Python.
  nlohmann::json LoadDump() {
    std::vector<fs::path> files;
    if (fs::exists(folder_ / "testhost")) {
      for (const auto& entry : fs::directory_iterator(folder_ / "testhost")) {
        files.push_back(entry.path());
      }
    }
    EXPECT_EQ(files.size(), 1u);
    if (files.size() != 1) return nullptr;
    const std::string name = files[0].filename().string();
    EXPECT_EQ(name.rfind("crash_dump_", 0), 0u) << name;
    EXPECT_EQ(name.size(), std::string("crash_dump_2026-01-01_00-00-00.pkl").size()) << name;
    const std::string text = testing::PythonUnpickleToJson(files[0].string());
    EXPECT_EQ(text.rfind("ERROR", 0), std::string::npos) << text;
    return nlohmann::json::parse(text, nullptr, false);
  }

  fs::path folder_;
};

TEST_F(CrashDumpTest, WritesFinishedAndUnfinishedRequestsInSglangShape) {
  CrashDump dump(folder_.string(), nlohmann::json{{"model_path", "m"}, {"port", 30000}});
  const double t0 = CrashDump::NowEpochSeconds();
  uint64_t a = dump.RecordReceived(Json{{"rid", "a"}}, t0);
  dump.RecordReceived(Json{{"rid", "b"}}, t0 + 1);
  dump.RecordFinished(a, Json{{"rid", "a"}}, Json{{"text", "out a"}}, t0, t0 + 2);
  const std::string path = dump.WriteNow();
  ASSERT_FALSE(path.empty());
  EXPECT_TRUE(fs::exists(path));
  nlohmann::json loaded = LoadDump();
  ASSERT_TRUE(loaded.is_object());
  EXPECT_EQ(loaded["server_args"], (nlohmann::json{{"model_path", "m"}, {"port", 30000}}));
  ASSERT_EQ(loaded["requests"].size(), 2u);
  // In arrival order of the records: a (finished), b (unfinished: out {}, finish time = now).
  const auto& first = loaded["requests"][0];
  EXPECT_EQ(first[0]["rid"], "a");
  EXPECT_EQ(first[1]["text"], "out a");
  EXPECT_DOUBLE_EQ(first[2].get<double>(), t0);
  EXPECT_DOUBLE_EQ(first[3].get<double>(), t0 + 2);
  const auto& second = loaded["requests"][1];
  EXPECT_EQ(second[0]["rid"], "b");
  EXPECT_EQ(second[1], nlohmann::json::object());
  EXPECT_GE(second[3].get<double>(), t0);
  // One dump per process.
  EXPECT_TRUE(dump.WriteNow().empty());
}

TEST_F(CrashDumpTest, NothingToDumpWritesNoFile) {
  CrashDump dump(folder_.string(), nlohmann::json::object());
  EXPECT_TRUE(dump.WriteNow().empty());
  EXPECT_FALSE(fs::exists(folder_));
}

TEST_F(CrashDumpTest, DropsFinishedRequestsOlderThanFiveMinutesAndKeepsTheNewest) {
  CrashDump dump(folder_.string(), nlohmann::json::object(), /*capacity=*/3);
  const double now = CrashDump::NowEpochSeconds();
  uint64_t old = dump.RecordReceived(Json{{"rid", "old"}}, now - 400);
  dump.RecordFinished(old, Json{{"rid", "old"}}, Json::object(), now - 400, now - 301);
  for (int i = 0; i < 5; ++i) {
    std::string rid(1, 'r');
    rid += std::to_string(i);
    uint64_t t = dump.RecordReceived(Json{{"rid", rid}}, now);
    dump.RecordFinished(t, Json{{"rid", rid}}, Json::object(), now, now);
  }
  ASSERT_FALSE(dump.WriteNow().empty());
  nlohmann::json loaded = LoadDump();
  std::vector<std::string> rids;
  for (const auto& request : loaded["requests"]) rids.push_back(request[0]["rid"]);
  EXPECT_EQ(rids, (std::vector<std::string>{"r2", "r3", "r4"}));
}

void CrashWith(CrashDump& dump, int how) {
  uint64_t t = dump.RecordReceived(Json{{"rid", "x"}}, 1.0);
  dump.RecordFinished(t, Json{{"rid", "x"}}, Json{{"text", "y"}}, 1.0,
                      CrashDump::NowEpochSeconds());
  dump.RecordReceived(Json{{"rid", "running"}}, 2.0);
  dump.InstallSignalHandlers();
  if (how == 0) {
    std::raise(SIGSEGV);
  } else {
    RADIX_CHECK_MSG(how == 0, "deliberate failure");
  }
}

TEST_F(CrashDumpTest, FatalSignalDumpsThenDiesOfTheSameSignal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  CrashDump dump(folder_.string(), nlohmann::json::object());
  EXPECT_EXIT(CrashWith(dump, 0), ::testing::KilledBySignal(SIGSEGV),
              "Dumped 1 finished and 1 unfinished requests before crash to .*testhost/crash_dump_");
  nlohmann::json loaded = LoadDump();
  ASSERT_TRUE(loaded.is_object());
  ASSERT_EQ(loaded["requests"].size(), 2u);
  EXPECT_EQ(loaded["requests"][0][1]["text"], "y");
  EXPECT_EQ(loaded["requests"][1][0]["rid"], "running");
}

TEST_F(CrashDumpTest, FailedCheckDumpsThenAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  CrashDump dump(folder_.string(), nlohmann::json::object());
  EXPECT_EXIT(CrashWith(dump, 1), ::testing::KilledBySignal(SIGABRT),
              "Dumped 1 finished and 1 unfinished");
  EXPECT_EQ(LoadDump()["requests"].size(), 2u);
}

}  // namespace
}  // namespace radixserve::api

// The pickles are decoded by CPython's pickle module (the reference), not by our own code.
#include "api/pickle_writer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "pickle_test_util.h"

namespace radixserve::api {
namespace {

using Json = nlohmann::ordered_json;

std::string RoundTrip(const std::string& bytes) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("radix_pickle_" + std::to_string(::getpid()) + ".pkl");
  std::ofstream(path, std::ios::binary) << bytes;
  std::string json = testing::PythonUnpickleToJson(path.string());
  std::filesystem::remove(path);
  return json;
}

TEST(PickleWriterTest, PythonLoadsEveryJsonKind) {
  Json value = {
      {"none", nullptr},
      {"t", true},
      {"f", false},
      {"ints", Json::array({0, -1, 255, 65536, INT32_MAX, INT32_MIN, int64_t{1} << 40,
                            -(int64_t{1} << 40), INT64_MAX, INT64_MIN, UINT64_MAX})},
      {"floats", Json::array({0.5, -2.25, 1e300, 1234.5678})},
      {"text", "caf\xc3\xa9 \xf0\x9f\x98\x80 \"quoted\" 'q'\n"},
      {"empty", Json::object()},
      {"empty_list", Json::array()},
      {"nested", Json{{"a", Json::array({1, Json{{"b", "c"}}})}}},
  };
  const std::string loaded = RoundTrip(pickle::Dumps(value));
  ASSERT_EQ(loaded.rfind("ERROR", 0), std::string::npos) << loaded;
  EXPECT_EQ(nlohmann::json::parse(loaded), nlohmann::json(value)) << loaded;
}

TEST(PickleWriterTest, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_EQ(RoundTrip(pickle::Dumps(Json("a\xff"
                                         "b\xc0\xaf"))),
            "\"a\\ufffdb\\ufffd\\ufffd\"");
}

TEST(PickleWriterTest, FragmentsConcatenateIntoOneList) {
  std::string bytes(pickle::kProto2, 2);
  bytes += pickle::kEmptyList;
  for (int i = 0; i < 3; ++i) {
    bytes += pickle::kMark;
    pickle::AppendValue(Json{{"i", i}}, bytes);
    pickle::AppendFloat(i + 0.5, bytes);
    bytes += pickle::kTuple;
    bytes += pickle::kAppend;
  }
  bytes += pickle::kStop;
  EXPECT_EQ(nlohmann::json::parse(RoundTrip(bytes)),
            nlohmann::json::parse(R"([[{"i": 0}, 0.5], [{"i": 1}, 1.5], [{"i": 2}, 2.5]])"));
}

}  // namespace
}  // namespace radixserve::api

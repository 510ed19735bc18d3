// Lines follow SGLang's tokenizer manager: "Receive: obj=<dataclass repr>" and
// "Finish: obj=..., out=<dict repr>", with what each --log-requests-level hides. Expected
// renderings are CPython's repr/str of the same values.
#include "api/request_log.h"

#include <gtest/gtest.h>

namespace radixserve::api {
namespace {

using Json = nlohmann::ordered_json;

Json Obj() {
  return Json{{"text", "Hi 'x'"},
              {"input_ids", Json::array({1, 2, 3})},
              {"sampling_params", Json{{"max_new_tokens", 8}, {"temperature", 0.5}}},
              {"stream", false},
              {"rid", "r1"}};
}

Json Out() {
  return Json{{"text", "ok"},
              {"output_ids", Json::array({7})},
              {"meta_info", Json{{"id", "r1"}, {"finish_reason", nullptr}}}};
}

TEST(RequestLogTest, LevelZeroShowsMetadataOnly) {
  RequestLog log(0);
  EXPECT_EQ(log.ReceiveLine(Obj()), "Receive: obj=GenerateReqInput(stream=False, rid='r1')");
  EXPECT_EQ(log.FinishLine(Obj(), Out()),
            "Finish: obj=GenerateReqInput(stream=False, rid='r1'), "
            "out={'meta_info': {'id': 'r1', 'finish_reason': None}}");
}

TEST(RequestLogTest, LevelOneAddsSamplingParams) {
  RequestLog log(1);
  EXPECT_EQ(log.ReceiveLine(Obj()),
            "Receive: obj=GenerateReqInput(sampling_params={'max_new_tokens': 8, "
            "'temperature': 0.5}, stream=False, rid='r1')");
}

TEST(RequestLogTest, LevelsTwoAndThreeShowInputsAndOutputs) {
  const std::string full =
      "Finish: obj=GenerateReqInput(text=\"Hi 'x'\", input_ids=[1, 2, 3], "
      "sampling_params={'max_new_tokens': 8, 'temperature': 0.5}, stream=False, rid='r1'), "
      "out={'text': 'ok', 'output_ids': [7], 'meta_info': {'id': 'r1', 'finish_reason': None}}";
  EXPECT_EQ(RequestLog(2).FinishLine(Obj(), Out()), full);
  EXPECT_EQ(RequestLog(3).FinishLine(Obj(), Out()), full);
}

TEST(RequestLogTest, LevelTwoCutsLongValuesToTheirEnds) {
  Json obj = {{"text", std::string(1500, 'a') + std::string(1500, 'b')}};
  const std::string line = RequestLog(2).ReceiveLine(obj);
  EXPECT_EQ(line, "Receive: obj=GenerateReqInput(text='" + std::string(1024, 'a') + "' ... '" +
                      std::string(1024, 'b') + "')");
  EXPECT_EQ(RequestLog(3).ReceiveLine(obj).size(), line.size() - 2048 - 7 + 3000);
}

}  // namespace
}  // namespace radixserve::api

// json_prefix / py_json / python_literal: JSON and Python literals read and written as SGLang's
// parsers (json.loads + json.dumps(ensure_ascii=False), ast.literal_eval) do.
#include "chat/json_prefix.h"

#include <gtest/gtest.h>

#include "chat/py_json.h"
#include "chat/python_literal.h"

namespace radixserve::chat {
namespace {

TEST(PyJsonTest, FloatReprMatchesPython) {
  EXPECT_EQ(PyFloatRepr(1.0), "1.0");
  EXPECT_EQ(PyFloatRepr(2.5), "2.5");
  EXPECT_EQ(PyFloatRepr(0.1), "0.1");
  EXPECT_EQ(PyFloatRepr(1e16), "1e+16");
  EXPECT_EQ(PyFloatRepr(123456789012345.0), "123456789012345.0");
  EXPECT_EQ(PyFloatRepr(1.5e-7), "1.5e-07");
  EXPECT_EQ(PyFloatRepr(0.0001), "0.0001");
  EXPECT_EQ(PyFloatRepr(-0.0), "-0.0");
  EXPECT_EQ(PyFloatRepr(1e100), "1e+100");
}

TEST(PyJsonTest, DumpsUsesPythonSeparatorsAndKeepsOrderAndUnicode) {
  Json v = Json::parse(R"({"b": [1, 2.0, "x\n\"y"], "a": {"日本": null, "t": true}})");
  EXPECT_EQ(PyJsonDumps(v), R"({"b": [1, 2.0, "x\n\"y"], "a": {"日本": null, "t": true}})");
  EXPECT_EQ(PyJsonDumps(Json("\x01")), "\"\\u0001\"");
}

TEST(JsonPrefixTest, CanonicalizesCompleteValues) {
  EXPECT_EQ(CanonicalJson(R"( {"a":1,"b":[true,null,1.50,1E2,-0]} )"),
            R"({"a": 1, "b": [true, null, 1.5, 100.0, 0]})");
  EXPECT_EQ(CanonicalJson(R"("\u00e9\ud83d\ude00\/")"), "\"é😀/\"");
  EXPECT_EQ(CanonicalJson(R"({"a": 1,})"), std::nullopt);
  EXPECT_EQ(CanonicalJson("\"raw\nnewline\""), std::nullopt);  // json.loads is strict
  EXPECT_EQ(CanonicalJson("{} x"), std::nullopt);
  EXPECT_EQ(CanonicalJson("012"), std::nullopt);
}

TEST(JsonPrefixTest, PartialValuesReportOnlyWhatIsFinal) {
  auto p = ScanJsonPrefix(R"({"city": "Par)", 0, false);
  EXPECT_EQ(p.state, JsonScanState::kPartial);
  EXPECT_EQ(p.canonical, R"({"city": "Par)");
  // A number may still grow; an escape may be half written.
  EXPECT_EQ(ScanJsonPrefix(R"({"n": 12)", 0, false).canonical, R"({"n": )");
  EXPECT_EQ(ScanJsonPrefix(R"({"s": "a\u00)", 0, false).canonical, R"({"s": "a)");
  EXPECT_EQ(ScanJsonPrefix("[tr", 0, false).canonical, "[");
  EXPECT_EQ(ScanJsonPrefix("12", 0, true).state, JsonScanState::kComplete);
  EXPECT_EQ(ScanJsonPrefix("{\"a\" x", 0, false).state, JsonScanState::kInvalid);
}

TEST(JsonPrefixTest, EveryPrefixIsAPrefixOfTheFinalText) {
  std::string text =
      R"({"q": "a \"b\" \u65e5\ud83d\ude00", "n": [1, -2.50e1, {"x": null}], "t": false})";
  std::string final_text = *CanonicalJson(text);
  for (size_t n = 0; n <= text.size(); ++n) {
    auto p = ScanJsonPrefix(text.substr(0, n), 0, false);
    ASSERT_NE(p.state, JsonScanState::kInvalid) << n;
    ASSERT_EQ(final_text.compare(0, p.canonical.size(), p.canonical), 0)
        << n << ": " << p.canonical;
  }
}

TEST(JsonPrefixTest, CallObjectsGiveNameAndArguments) {
  auto c = ScanJsonCall(R"({"name": "f", "parameters": {"a": "x"}})", 0, false);
  EXPECT_EQ(c.state, JsonScanState::kComplete);
  EXPECT_EQ(c.name, "f");
  EXPECT_EQ(c.arguments, R"({"a": "x"})");
  auto none = ScanJsonCall(R"({"name": "f"})", 0, false);
  EXPECT_EQ(none.arguments, "{}");
  auto partial = ScanJsonCall(R"({"name": "f", "arguments": {"a": 1)", 0, false);
  EXPECT_EQ(partial.state, JsonScanState::kPartial);
  EXPECT_EQ(partial.arguments, R"({"a": )");
}

TEST(PythonLiteralTest, ReadsLiteralsAsJsonDumpsWritesThem) {
  EXPECT_EQ(PyJsonDumps(ParsePyLiteral("{'a': 'x', \"b\": [1, 2.5, True, None], 3: (1,)}").value),
            R"({"a": "x", "b": [1, 2.5, true, null], "3": [1]})");
  EXPECT_EQ(PyJsonDumps(ParsePyLiteral("'it\\'s' \"joined\"").value), "\"it'sjoined\"");
  EXPECT_EQ(PyJsonDumps(ParsePyLiteral("-1_000").value), "-1000");
  EXPECT_EQ(PyJsonDumps(ParsePyLiteral("0x1F").value), "31");
  EXPECT_EQ(ParsePyLiteral("b'x'").error, PyLiteralError::kUnrepresentable);
  EXPECT_EQ(ParsePyLiteral("{1, 2}").error, PyLiteralError::kUnrepresentable);
  EXPECT_EQ(ParsePyLiteral("foo").error, PyLiteralError::kSyntax);
  EXPECT_EQ(ParsePyLiteral("1 + 2").error, PyLiteralError::kSyntax);
}

TEST(PythonLiteralTest, CallLists) {
  auto calls = ParsePyCallList(R"([get_weather(city="Paris", days=3), now()])");
  ASSERT_TRUE(calls.has_value());
  ASSERT_EQ(calls->size(), 2u);
  EXPECT_EQ((*calls)[0].name, "get_weather");
  EXPECT_EQ(PyJsonDumps((*calls)[0].arguments.value), R"({"city": "Paris", "days": 3})");
  EXPECT_EQ(PyJsonDumps((*calls)[1].arguments.value), "{}");
  EXPECT_FALSE(ParsePyCallList("[1, 2]").has_value());
  EXPECT_FALSE(ParsePyCallList("[f(1)]").has_value());  // positional arguments are not read
}

}  // namespace
}  // namespace radixserve::chat

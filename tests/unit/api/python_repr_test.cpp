// Expected strings are what CPython 3 prints for the same values (repr / str), so Python is the
// oracle, not this implementation.
#include "api/python_repr.h"

#include <gtest/gtest.h>

namespace radixserve::api {
namespace {

using Json = nlohmann::ordered_json;

TEST(PyReprTest, QuotesAndEscapesLikePython) {
  EXPECT_EQ(PyRepr("plain"), "'plain'");
  EXPECT_EQ(PyRepr("it's"), "\"it's\"");
  EXPECT_EQ(PyRepr("say \"hi\""), "'say \"hi\"'");
  EXPECT_EQ(PyRepr("both ' and \""), "'both \\' and \"'");
  EXPECT_EQ(PyRepr("tab\tnl\nbs\\"), "'tab\\tnl\\nbs\\\\'");
  EXPECT_EQ(PyRepr(std::string("\x00\x7f\xc2\x85\xc2\xa0\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 15)),
            "'\\x00\\x7f\\x85\\xa0\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80'");
  EXPECT_EQ(PyRepr("\xe2\x80\x8b\xe2\x80\xa8\xee\x80\x80\xef\xbb\xbf"),
            "'\\u200b\\u2028\\ue000\\ufeff'");
  EXPECT_EQ(PyRepr("\xf3\xb0\x80\x80"), "'\\U000f0000'");
}

TEST(PyReprTest, TruncatesLongStringsAndListsAroundTheMiddle) {
  EXPECT_EQ(PyReprTruncated(Json("abcdefghij"), 4), "'ab' ... 'ij'");
  EXPECT_EQ(PyReprTruncated(Json("abcd"), 4), "'abcd'");
  EXPECT_EQ(PyReprTruncated(Json::array({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}), 4), "[0, 1] ... [8, 9]");
  // Code points, not bytes: four e-acutes fit in 4.
  EXPECT_EQ(PyReprTruncated(Json("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"), 4),
            "'\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9'");
}

TEST(PyReprTest, RendersValuesAsPythonStr) {
  Json list = Json::array({1.5, nullptr, true, "x", Json::array({1, Json{{"a", 0.25}}})});
  EXPECT_EQ(PyReprTruncated(list, 100), "[1.5, None, True, 'x', [1, {'a': 0.25}]]");
}

TEST(PyReprTest, SkipsOnlyTopLevelNames) {
  Json obj = {{"text", "t"}, {"meta_info", Json{{"text", "inner"}, {"id", "r"}}}};
  EXPECT_EQ(PyReprTruncated(obj, 100, {"text"}), "{'meta_info': {'text': 'inner', 'id': 'r'}}");
  EXPECT_EQ(PyDataclassRepr("Req", obj, 100, {"meta_info"}), "Req(text='t')");
  EXPECT_EQ(PyDataclassRepr("Req", Json{{"text", "abcdef"}, {"stream", false}}, 2),
            "Req(text='a' ... 'f', stream=False)");
}

}  // namespace
}  // namespace radixserve::api

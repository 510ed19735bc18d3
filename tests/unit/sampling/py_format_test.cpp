// Expected strings are Python 3.11's repr() of the same doubles (the oracle SGLang's f-strings
// use).
#include "sampling/py_format.h"

#include <gtest/gtest.h>

namespace radixserve::sampling {
namespace {

TEST(PyFormatTest, MatchesPythonRepr) {
  EXPECT_EQ(FormatPyFloat(0.5), "0.5");
  EXPECT_EQ(FormatPyFloat(-1.0), "-1.0");
  EXPECT_EQ(FormatPyFloat(2.5), "2.5");
  EXPECT_EQ(FormatPyFloat(1e-07), "1e-07");
  EXPECT_EQ(FormatPyFloat(1e-05), "1e-05");
  EXPECT_EQ(FormatPyFloat(0.0001), "0.0001");
  EXPECT_EQ(FormatPyFloat(1e16), "1e+16");
  EXPECT_EQ(FormatPyFloat(1.5e16), "1.5e+16");
  EXPECT_EQ(FormatPyFloat(123456789.0), "123456789.0");
  EXPECT_EQ(FormatPyFloat(1e15), "1000000000000000.0");
  EXPECT_EQ(FormatPyFloat(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FormatPyFloat(-2.0000001), "-2.0000001");
  EXPECT_EQ(FormatPyFloat(3.0), "3.0");
  EXPECT_EQ(FormatPyFloat(1e100), "1e+100");
  EXPECT_EQ(FormatPyFloat(2.220446049250313e-16), "2.220446049250313e-16");
  EXPECT_EQ(FormatPyFloat(12345678901234567.0), "1.2345678901234568e+16");
  EXPECT_EQ(FormatPyFloat(-0.0), "-0.0");
  EXPECT_EQ(FormatPyFloat(0.0), "0.0");
}

TEST(PyFormatTest, IntegersPrintLikePythonInts) {
  EXPECT_EQ(FormatPyNumber(-3.0, true), "-3");
  EXPECT_EQ(FormatPyNumber(-3.0, false), "-3.0");
  EXPECT_EQ(FormatPyNumber(2.5, false), "2.5");
}

}  // namespace
}  // namespace radixserve::sampling

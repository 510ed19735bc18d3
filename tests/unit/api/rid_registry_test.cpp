#include "api/rid_registry.h"

#include <gtest/gtest.h>

namespace radixserve::api {
namespace {

TEST(RidRegistryTest, LiveRidsAndDuplicatesWithinACall) {
  RidRegistry rids;
  EXPECT_FALSE(rids.ClaimAll({"a", "b"}).has_value());
  EXPECT_EQ(rids.ClaimAll({"c", "a"}).value_or(""), "a");
  EXPECT_EQ(rids.size(), 2u);  // nothing of the refused call was claimed
  EXPECT_EQ(rids.ClaimAll({"d", "d"}).value_or(""), "d");
  EXPECT_EQ(rids.size(), 2u);
  rids.Release("a");
  EXPECT_FALSE(rids.ClaimAll({"a"}).has_value());
  rids.Release("unknown");
  EXPECT_EQ(rids.size(), 2u);
}

}  // namespace
}  // namespace radixserve::api

#include "common/status.h"

#include <string>

#include <gtest/gtest.h>

#include "common/machine.h"

namespace radixserve {
namespace {

Expected<int> Half(int value) {
  if (value % 2 != 0) return InvalidArgument("odd: " + std::to_string(value));
  return value / 2;
}

Status Chain(int value) {
  RADIX_RETURN_IF_ERROR(Half(value).status());
  return Status::Ok();
}

TEST(Status, ExpectedHoldsValueOrError) {
  auto ok = Half(8);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 4);
  EXPECT_TRUE(ok.status().ok());
  auto bad = Half(3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "odd: 3");
}

TEST(Status, ReturnIfErrorPropagates) {
  EXPECT_TRUE(Chain(2).ok());
  EXPECT_EQ(Chain(5).message(), "odd: 5");
}

TEST(Machine, ProbeReportsThisMachine) {
  MachineInfo info = ProbeMachine();
  EXPECT_GT(info.total_memory_bytes, 0u);
  EXPECT_GE(info.usable_cpus, 1);
  EXPECT_LE(info.available_memory_bytes, info.total_memory_bytes);
}

}  // namespace
}  // namespace radixserve

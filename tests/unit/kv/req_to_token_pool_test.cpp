#include "kv/req_to_token_pool.h"

#include <vector>

#include <gtest/gtest.h>

namespace radixserve::kv {
namespace {

TEST(ReqToTokenPoolTest, AllocFromFrontFreeToBack) {
  ReqToTokenPool pool(3, 8);
  EXPECT_EQ(pool.Alloc().value(), 0);
  EXPECT_EQ(pool.Alloc().value(), 1);
  pool.Free(0);
  EXPECT_EQ(pool.Alloc().value(), 2);
  EXPECT_EQ(pool.Alloc().value(), 0);
  Expected<int32_t> none = pool.Alloc();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(none.status().message().find("--max-running-requests"), std::string::npos);
  EXPECT_EQ(pool.available_size(), 0u);
  pool.Clear();
  EXPECT_EQ(pool.available_size(), 3u);
}

TEST(ReqToTokenPoolTest, RowsAreIndependent) {
  ReqToTokenPool pool(2, 6);
  const int32_t a = pool.Alloc().value();
  const int32_t b = pool.Alloc().value();
  const std::vector<int32_t> values{5, 6, 7};
  pool.Write(a, 1, values);
  pool.Write(b, 0, std::vector<int32_t>{9});
  std::span<const int32_t> slice = pool.Slice(a, 1, 4);
  EXPECT_EQ(std::vector<int32_t>(slice.begin(), slice.end()), values);
  EXPECT_EQ(pool.Row(b)[0], 9);
  EXPECT_EQ(pool.data()[a * 6 + 3], 7);
  EXPECT_FALSE(pool.IsFree(a));
  pool.Free(a);
  EXPECT_TRUE(pool.IsFree(a));
}

}  // namespace
}  // namespace radixserve::kv

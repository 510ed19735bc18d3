// common/huge_pages.h: large allocations start on a 2 MB boundary (where a huge page can back
// them), small ones come from operator new with 64-byte alignment, and both hold what is written.
#include "common/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace radixserve {
namespace {

TEST(HugePagesTest, LargeAllocationsStartOnAHugePageBoundary) {
  for (size_t bytes : {kHugePageBytes, kHugePageBytes + 1, 3 * kHugePageBytes + 12345}) {
    auto* p = static_cast<uint8_t*>(AllocateLarge(bytes));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u) << bytes;
    std::memset(p, 0x5A, bytes);
    EXPECT_EQ(p[0], 0x5A);
    EXPECT_EQ(p[bytes - 1], 0x5A);
    FreeLarge(p, bytes);
  }
}

TEST(HugePagesTest, SmallAllocationsAreAlignedToACacheLine) {
  for (size_t bytes : {size_t{1}, size_t{100}, kHugePageBytes - 1}) {
    auto* p = static_cast<uint8_t*>(AllocateLarge(bytes));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 1, bytes);
    FreeLarge(p, bytes);
  }
}

TEST(HugePagesTest, ALargeBufferGrowsAndKeepsItsBytes) {
  LargeBuffer buffer(1000, 7);
  buffer.resize(3 * kHugePageBytes, 9);
  EXPECT_EQ(buffer[999], 7);
  EXPECT_EQ(buffer[1000], 9);
  EXPECT_EQ(buffer.back(), 9);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % kHugePageBytes, 0u);
  LargeBuffer copy = buffer;
  EXPECT_EQ(copy, buffer);
  buffer.clear();
  buffer.shrink_to_fit();
  EXPECT_TRUE(buffer.empty());
}

}  // namespace
}  // namespace radixserve

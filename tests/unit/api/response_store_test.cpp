#include "api/response_store.h"

#include <string>

#include <gtest/gtest.h>

namespace radixserve::api {
namespace {

StoredResponse Entry(const std::string& text) {
  StoredResponse entry;
  entry.response = {{"output_text", text}};
  entry.messages.push_back({{"role", "user"}, {"content", text}});
  return entry;
}

TEST(ResponseStoreTest, KeepsAndForgets) {
  ResponseStore store(8, 1 << 20);
  store.Put("a", Entry("one"));
  auto got = store.Get("a");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->response["output_text"], "one");
  EXPECT_EQ(got->messages[0]["content"], "one");
  EXPECT_FALSE(store.Get("b"));
  EXPECT_TRUE(store.Erase("a"));
  EXPECT_FALSE(store.Erase("a"));
  EXPECT_FALSE(store.Get("a"));
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
}

TEST(ResponseStoreTest, OldestGoFirstPastTheCountBound) {
  ResponseStore store(3, 1 << 20);
  for (int i = 0; i < 5; ++i) {
    std::string id = "r";
    id += std::to_string(i);  // (not "r" + ...: GCC 12's -Wrestrict false positive)
    store.Put(id, Entry(std::to_string(i)));
  }
  EXPECT_EQ(store.size(), 3u);
  EXPECT_FALSE(store.Get("r0"));
  EXPECT_FALSE(store.Get("r1"));
  EXPECT_TRUE(store.Get("r2") && store.Get("r3") && store.Get("r4"));
}

TEST(ResponseStoreTest, ByteBoundAndOversizedEntries) {
  ResponseStore store(100, 400);
  store.Put("small1", Entry(std::string(100, 'x')));
  store.Put("small2", Entry(std::string(100, 'y')));
  EXPECT_LE(store.bytes(), 400u);
  EXPECT_FALSE(store.Get("small1"));  // two of them do not fit in 400 bytes
  EXPECT_TRUE(store.Get("small2"));
  store.Put("huge", Entry(std::string(1000, 'z')));
  EXPECT_FALSE(store.Get("huge"));
  EXPECT_TRUE(store.Get("small2"));
}

TEST(ResponseStoreTest, ReplacingKeepsOneEntryAndTheOrderStaysBounded) {
  ResponseStore store(2, 1 << 20);
  for (int i = 0; i < 1000; ++i) store.Put("same", Entry(std::to_string(i)));
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.Get("same")->response["output_text"], "999");
  store.Put("other", Entry("o"));
  store.Put("third", Entry("t"));
  // "same" was put before "other": it goes first although it was replaced many times.
  EXPECT_FALSE(store.Get("same"));
  EXPECT_TRUE(store.Get("other") && store.Get("third"));
}

}  // namespace
}  // namespace radixserve::api

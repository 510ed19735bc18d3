// SessionStore against SGLang's Session.create_req rules (sglang/srt/session/session_controller.py,
// 0.5.23): which history a request continues, and what is refused.
#include "api/session_store.h"

#include <gtest/gtest.h>

namespace radixserve::api {
namespace {

using Ids = std::vector<int32_t>;

TEST(SessionStoreTest, OpenGivesAnIdAndRefusesAnOpenOne) {
  SessionStore store;
  Expected<std::string> random = store.Open({});
  ASSERT_TRUE(random.ok());
  EXPECT_EQ(random->size(), 32u);
  ASSERT_TRUE(store.Open({.id = "a"}).ok());
  EXPECT_FALSE(store.Open({.id = "a"}).ok());
  EXPECT_TRUE(store.Close("a").empty());
  EXPECT_TRUE(store.Open({.id = "a"}).ok());
  EXPECT_EQ(store.size(), 2u);
}

TEST(SessionStoreTest, ContinuesTheNamedRequestWithItsOutput) {
  SessionStore store;
  ASSERT_TRUE(store.Open({.id = "s"}).ok());
  auto first = store.Begin({.id = "s"}, "r1", {1, 2, 3}, /*bos=*/1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->input_ids, (Ids{1, 2, 3}));  // no history: nothing is stripped
  store.Finish("s", "r1", {7, 8}, true);
  auto second = store.Begin({.id = "s", .rid = "r1"}, "r2", {1, 4, 5}, /*bos=*/1);
  ASSERT_TRUE(second.ok());
  // The BOS of an appended turn goes; the history is r1's prompt and output.
  EXPECT_EQ(second->input_ids, (Ids{1, 2, 3, 7, 8, 4, 5}));
  store.Finish("s", "r2", {9}, true);
  auto dropped =
      store.Begin({.id = "s", .rid = "r1", .drop_previous_output = true}, "r3", {6}, std::nullopt);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped->input_ids, (Ids{1, 2, 3, 6}));
  auto cut = store.Begin({.id = "s", .rid = "r2", .offset = 2}, "r4", {6}, std::nullopt);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->input_ids, (Ids{1, 2, 6}));
  auto negative = store.Begin({.id = "s", .rid = "r2", .offset = -3}, "r5", {6}, std::nullopt);
  ASSERT_TRUE(negative.ok());
  EXPECT_EQ(negative->input_ids, (Ids{1, 2, 3, 7, 8, 6}));  // [1,2,3,7,8,4,5,9][:-3] + [6]
  auto none = store.Begin({.id = "s"}, "r6", {6}, std::nullopt);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->input_ids, (Ids{6}));
}

TEST(SessionStoreTest, RefusesWhatSglangRefuses) {
  SessionStore store;
  EXPECT_EQ(store.Begin({.id = "nope"}, "r", {1}, std::nullopt).status().message(),
            "Invalid request: session id nope does not exist");
  ASSERT_TRUE(store.Open({.id = "s"}).ok());
  EXPECT_EQ(store.Begin({.id = "s", .rid = "missing"}, "r", {1}, std::nullopt).status().message(),
            "Invalid request session id");
  ASSERT_TRUE(store.Begin({.id = "s"}, "r1", {1}, std::nullopt).ok());
  EXPECT_EQ(store.Begin({.id = "s", .rid = "r1"}, "r2", {2}, std::nullopt).status().message(),
            "Session request is appending to a request that hasn't finished.");
  store.Finish("s", "r1", {}, true);
  EXPECT_EQ(store.Begin({.id = "s", .rid = "r1", .offset = 0}, "r3", {}, std::nullopt).ok(), true);
  EXPECT_EQ(store.Begin({.id = "s", .rid = "r1", .offset = -5}, "r4", {}, std::nullopt)
                .status()
                .message(),
            "A session request must contain input tokens after restoring history.");
}

TEST(SessionStoreTest, ReplaceDropsChildrenAndReportsUnfinishedOnes) {
  SessionStore store;
  ASSERT_TRUE(store.Open({.id = "s"}).ok());
  ASSERT_TRUE(store.Begin({.id = "s"}, "root", {1}, std::nullopt).ok());
  store.Finish("s", "root", {2}, true);
  ASSERT_TRUE(store.Begin({.id = "s", .rid = "root"}, "done", {3}, std::nullopt).ok());
  store.Finish("s", "done", {4}, true);
  ASSERT_TRUE(store.Begin({.id = "s", .rid = "done"}, "running", {5}, std::nullopt).ok());
  auto replaced =
      store.Begin({.id = "s", .rid = "root", .replace = true}, "new", {6}, std::nullopt);
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(replaced->aborted, (std::vector<std::string>{"running"}));
  EXPECT_EQ(replaced->input_ids, (Ids{1, 2, 6}));
  EXPECT_FALSE(store.Begin({.id = "s", .rid = "done"}, "x", {1}, std::nullopt).ok());
  // replace without a rid clears everything and starts from nothing.
  auto all = store.Begin({.id = "s", .replace = true}, "fresh", {9}, std::nullopt);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->aborted, (std::vector<std::string>{"new"}));
  EXPECT_EQ(all->input_ids, (Ids{9}));
}

TEST(SessionStoreTest, StreamingSessionsContinueTheLastCompletedRequest) {
  SessionStore store;
  ASSERT_TRUE(store.Open({.id = "s", .streaming = true}).ok());
  ASSERT_TRUE(store.Begin({.id = "s"}, "a", {1}, std::nullopt).ok());
  EXPECT_EQ(store.Begin({.id = "s"}, "b", {2}, std::nullopt).status().message(),
            "Streaming session already has an active request.");
  store.Finish("s", "a", {5}, true);
  auto next = store.Begin({.id = "s"}, "b", {2}, std::nullopt);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->input_ids, (Ids{1, 5, 2}));
  store.Finish("s", "b", {}, /*completed=*/false);  // aborted: the history stays at "a"
  auto again = store.Begin({.id = "s"}, "c", {3}, std::nullopt);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->input_ids, (Ids{1, 5, 3}));
  EXPECT_EQ(store.Begin({.id = "s", .replace = true}, "d", {3}, std::nullopt).status().message(),
            "Streaming session already has an active request.");
  // Closing while "c" runs waits for it.
  EXPECT_TRUE(store.Close("s").empty());
  EXPECT_EQ(store.size(), 1u);
  store.Finish("s", "c", {6}, true);
  EXPECT_EQ(store.size(), 0u);
}

TEST(SessionStoreTest, CloseReportsUnfinishedRequests) {
  SessionStore store;
  ASSERT_TRUE(store.Open({.id = "s"}).ok());
  ASSERT_TRUE(store.Begin({.id = "s"}, "r", {1}, std::nullopt).ok());
  EXPECT_EQ(store.Close("s"), (std::vector<std::string>{"r"}));
  EXPECT_TRUE(store.Close("unknown").empty());
}

TEST(SessionStoreTest, ReusingARidInASessionIsRefused) {
  SessionStore store;
  ASSERT_TRUE(store.Open({.id = "s"}).ok());
  ASSERT_TRUE(store.Begin({.id = "s"}, "r", {1}, std::nullopt).ok());
  store.Finish("s", "r", {2}, true);
  EXPECT_FALSE(store.Begin({.id = "s", .rid = "r"}, "r", {3}, std::nullopt).ok());
}

TEST(SessionStoreTest, ARefusedRequestLeavesNoTrace) {
  SessionStore store;
  ASSERT_TRUE(store.Open({.id = "s"}).ok());
  ASSERT_TRUE(store.Begin({.id = "s"}, "r1", {1, 2}, std::nullopt).ok());
  store.Finish("s", "r1", {3}, true);
  ASSERT_TRUE(store.Begin({.id = "s", .rid = "r1"}, "r2", {4}, std::nullopt).ok());
  store.Drop("s", "r2");  // the engine refused it: it never ran
  // Neither continuing it (it does not exist) nor reusing its rid is refused as for a request
  // that ran; r1 is continued as if r2 had never begun.
  EXPECT_EQ(store.Begin({.id = "s", .rid = "r2"}, "r3", {5}, std::nullopt).status().message(),
            "Invalid request session id");
  auto again = store.Begin({.id = "s", .rid = "r1"}, "r2", {4}, std::nullopt);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->input_ids, (Ids{1, 2, 3, 4}));
  // Streaming sessions: a refused request leaves the session free for the next one.
  ASSERT_TRUE(store.Open({.id = "st", .streaming = true}).ok());
  ASSERT_TRUE(store.Begin({.id = "st"}, "a", {1}, std::nullopt).ok());
  store.Drop("st", "a");
  EXPECT_TRUE(store.Begin({.id = "st"}, "b", {2}, std::nullopt).ok());
}

}  // namespace
}  // namespace radixserve::api

#include "spec/ngram_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace radixserve::spec {
namespace {

using Tokens = std::vector<int32_t>;

NgramTableOptions Options(size_t min_w, size_t max_w, size_t branch, NgramMatchType type) {
  NgramTableOptions o;
  o.min_match_window = min_w;
  o.max_match_window = max_w;
  o.branch_length = branch;
  o.match_type = type;
  return o;
}

TEST(NgramTableTest, DraftsTheContinuationOfAnEarlierOccurrence) {
  NgramTable table(Options(1, 4, 8, NgramMatchType::kBfs));
  const Tokens text = {1, 2, 3, 4, 5, 6, 7, 9, 1, 2, 3};
  table.Record(text);
  EXPECT_EQ(table.Draft(text, 4), (Tokens{4, 5, 6, 7}));
  EXPECT_EQ(table.Draft(text, 2), (Tokens{4, 5}));
  EXPECT_TRUE(table.Draft(text, 0).empty());
}

TEST(NgramTableTest, NothingMatchesGivesAnEmptyDraft) {
  NgramTable table(Options(1, 4, 8, NgramMatchType::kBfs));
  table.Record(Tokens{1, 2, 3});
  EXPECT_TRUE(table.Draft(Tokens{7, 8}, 3).empty());
}

TEST(NgramTableTest, ChainStopsAtTheBranchLength) {
  // Paths hold at most branch_length tokens: matching 2 tokens leaves 2 more.
  NgramTable table(Options(2, 2, 4, NgramMatchType::kBfs));
  table.Record(Tokens{1, 2, 3, 4, 5, 6});
  EXPECT_EQ(table.Draft(Tokens{1, 2}, 10), (Tokens{3, 4}));
}

TEST(NgramTableTest, LongerWindowDisambiguates) {
  // After "2" came 3 (twice) and 8; after "7 2" only 8.
  NgramTable table(Options(1, 3, 8, NgramMatchType::kProb));
  table.Record(Tokens{1, 2, 3, 0, 1, 2, 3, 0, 7, 2, 8, 0});
  EXPECT_EQ(table.Draft(Tokens{7, 2}, 1), (Tokens{8}));
  EXPECT_EQ(table.Draft(Tokens{5, 2}, 1), (Tokens{3}));  // window 1 only: the frequent one
}

TEST(NgramTableTest, MatchTypePicksRecentOrFrequent) {
  const Tokens text = {5, 1, 5, 1, 5, 1, 5, 2};
  NgramTable bfs(Options(1, 1, 4, NgramMatchType::kBfs));
  NgramTable prob(Options(1, 1, 4, NgramMatchType::kProb));
  // Record token by token, as a growing output is recorded.
  for (size_t i = 1; i <= text.size(); ++i) {
    bfs.Record(std::span(text).first(i), i - 1);
    prob.Record(std::span(text).first(i), i - 1);
  }
  EXPECT_EQ(bfs.Draft(Tokens{5}, 1), (Tokens{2}));   // most recent
  EXPECT_EQ(prob.Draft(Tokens{5}, 1), (Tokens{1}));  // most frequent
}

TEST(NgramTableTest, IncrementalRecordingEqualsRecordingAtOnce) {
  const Tokens text = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4};
  NgramTable whole(Options(1, 5, 6, NgramMatchType::kProb));
  NgramTable steps(Options(1, 5, 6, NgramMatchType::kProb));
  whole.Record(text);
  for (size_t i = 1; i <= text.size(); i += 3) {
    steps.Record(std::span(text).first(std::min(i + 2, text.size())), i - 1);
  }
  EXPECT_EQ(whole.num_nodes(), steps.num_nodes());
  for (size_t end = 1; end <= text.size(); ++end) {
    const auto context = std::span(text).first(end);
    EXPECT_EQ(whole.Draft(context, 4), steps.Draft(context, 4)) << end;
  }
}

TEST(NgramTableTest, CapacityBoundsTheNodes) {
  NgramTableOptions o = Options(1, 3, 4, NgramMatchType::kBfs);
  o.capacity = 40;
  NgramTable table(o);
  Tokens text;
  for (int32_t i = 0; i < 100; ++i) {
    text.push_back(i);
    table.Record(text, text.size() - 1);
    EXPECT_LE(table.num_nodes(), 40u);
  }
  // The latest tokens are still there to draft from.
  EXPECT_EQ(table.Draft(Tokens{96}, 3), (Tokens{97, 98, 99}));
}

}  // namespace
}  // namespace radixserve::spec

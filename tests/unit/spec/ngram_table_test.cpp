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

NgramTableOptions TreeOptions(size_t min_w, size_t max_w, size_t branch, NgramMatchType type,
                              size_t min_b, size_t max_b) {
  NgramTableOptions o = Options(min_w, max_w, branch, type);
  o.min_bfs_breadth = min_b;
  o.max_bfs_breadth = max_b;
  return o;
}

TEST(NgramTableTest, BfsTreeMergesEveryWindowsContinuations) {
  // Breadth step (3 - 1) / (2 - 1 + 1) = 1: the 2-token window starts at breadth 1, the 1-token
  // window at 2, and each level takes one less (at least 1).
  NgramTable table(TreeOptions(1, 2, 4, NgramMatchType::kBfs, 1, 3));
  table.Record(Tokens{1, 2, 3, 4, 0});
  table.Record(Tokens{1, 2, 5, 6, 0});
  table.Record(Tokens{7, 2, 8, 0});
  // "1 2": the most recent continuation 5 6. "2": the two most recent, 8 (new) and 5 (merged),
  // then one child each: 0 under 8, 6 under 5 (merged), then 0 under 6.
  const DraftTree tree = table.Tree(Tokens{9, 1, 2}, 10);
  EXPECT_EQ(tree.tokens, (Tokens{5, 6, 8, 0, 0}));
  EXPECT_EQ(tree.parents, (Tokens{-1, 0, -1, 2, 1}));
  const DraftTree small = table.Tree(Tokens{9, 1, 2}, 3);
  EXPECT_EQ(small.tokens, (Tokens{5, 6, 8}));
  EXPECT_EQ(small.parents, (Tokens{-1, 0, -1}));
  EXPECT_TRUE(table.Tree(Tokens{9, 1, 2}, 0).empty());
  EXPECT_TRUE(table.Tree(Tokens{11, 12}, 5).empty());
  // Breadth 1 everywhere and one window: the chain Draft gives.
  NgramTable chain(TreeOptions(2, 2, 4, NgramMatchType::kBfs, 1, 1));
  chain.Record(Tokens{1, 2, 3, 4, 0});
  chain.Record(Tokens{1, 2, 5, 6, 0});
  const DraftTree one = chain.Tree(Tokens{1, 2}, 4);
  EXPECT_EQ(one.tokens, chain.Draft(Tokens{1, 2}, 4));
  EXPECT_EQ(one.parents, (Tokens{-1, 0}));
}

TEST(NgramTableTest, ProbTreeTakesTheMostProbablePathsFirst) {
  // After 2: 3 three times, 4 once; after 2 3: 9 twice, 7 once. Path probabilities: 3 .75,
  // 3 9 .5, 4 .25, 3 7 .25, 4 1 .25 (ties: the earlier candidate).
  NgramTable table(TreeOptions(1, 1, 3, NgramMatchType::kProb, 1, 2));
  for (const Tokens& t : {Tokens{2, 3, 9}, Tokens{2, 3, 9}, Tokens{2, 3, 7}, Tokens{2, 4, 1}}) {
    table.Record(t);
  }
  const DraftTree tree = table.Tree(Tokens{2}, 5);
  EXPECT_EQ(tree.tokens, (Tokens{3, 9, 4, 7, 1}));
  EXPECT_EQ(tree.parents, (Tokens{-1, 0, -1, 0, 2}));
  // max_bfs_breadth 1: one child per node.
  NgramTable narrow(TreeOptions(1, 1, 3, NgramMatchType::kProb, 1, 1));
  for (const Tokens& t : {Tokens{2, 3, 9}, Tokens{2, 3, 9}, Tokens{2, 3, 7}, Tokens{2, 4, 1}}) {
    narrow.Record(t);
  }
  EXPECT_EQ(narrow.Tree(Tokens{2}, 5).tokens, (Tokens{3, 9}));
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

// DraftRunner on stories260K: the drafts are the draft model's own greedy continuation (computed
// independently by running the model token by token on private KV buffers), after a first call,
// after accepted drafts extend the sequence, after a slot's page is freed and handed to another
// sequence (its stale draft rows are recomputed), and when the catch-up budget splits a long
// prompt over several calls.
#include "spec/draft_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "model/model_loader.h"

namespace radixserve::spec {
namespace {

const std::string kStoriesGguf =
    std::string(RADIX_SHARED_DIR) + "/models/stories260K/gguf/stories260K.gguf";

std::vector<int32_t> Tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> out{1};
  while (static_cast<int>(out.size()) < n) out.push_back(static_cast<int32_t>(3 + rng() % 500));
  return out;
}

class DraftRunnerTest : public ::testing::Test {
 protected:
  static constexpr int32_t kPage = 4;
  static constexpr size_t kSteps = 4;
  static constexpr size_t kJobs = 2;

  void SetUp() override {
    model::LoadOptions options;
    options.model_path = kStoriesGguf;
    auto loaded = model::LoadModel(options);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    model_ = std::shared_ptr<const model::CausalLM>(std::move(loaded).value());
    kv::TokenToKVPoolOptions pool_options;
    pool_options.size = 256;
    pool_options.page_size = kPage;
    auto pool = kv::TokenToKVPool::Create(pool_options);
    ASSERT_TRUE(pool.ok());
    pool_ = std::make_unique<kv::TokenToKVPool>(std::move(pool).value());
    const model::ModelConfig& mc = model_->config();
    kv::KvStorageSpec spec;
    spec.num_layers = static_cast<int32_t>(mc.num_layers);
    spec.kv_heads = static_cast<int32_t>(mc.num_kv_heads);
    spec.head_dim = static_cast<int32_t>(mc.head_dim);
    spec.num_rows = scratch_row() + kJobs * kSteps;
    auto storage = kv::KvStorage::Create(spec);
    ASSERT_TRUE(storage.ok());
    storage_ = std::make_unique<kv::KvStorage>(std::move(storage).value());
  }

  size_t scratch_row() const { return (256 / kPage + 1) * kPage; }

  std::unique_ptr<DraftRunner> MakeRunner(size_t catch_up = 4096) {
    DraftRunnerOptions options;
    options.max_jobs = kJobs;
    options.max_steps = kSteps;
    options.max_catch_up_tokens = catch_up;
    return std::make_unique<DraftRunner>(model_, storage_.get(), pool_.get(), scratch_row(),
                                         options);
  }

  // The model's greedy continuation of `tokens`, `n` tokens, on KV buffers of its own.
  std::vector<int32_t> Greedy(std::vector<int32_t> tokens, size_t n) {
    const model::ModelConfig& mc = model_->config();
    model::KvCacheBuffers kv(mc.num_layers, 512, mc.num_kv_heads, mc.head_dim);
    std::vector<int32_t> slots(512);
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int32_t>(i);
    std::vector<int32_t> out;
    size_t done = 0;
    const auto vocab = static_cast<size_t>(mc.vocab_size);
    std::vector<float> logits(vocab);
    while (out.size() < n) {
      model::ForwardBatch batch;
      for (size_t p = done; p < tokens.size(); ++p) {
        batch.token_ids.push_back(tokens[p]);
        batch.positions.push_back(static_cast<int64_t>(p));
      }
      batch.logit_indices.push_back(batch.num_tokens() - 1);
      batch.sequences.push_back({static_cast<int64_t>(done),
                                 static_cast<int64_t>(tokens.size() - done),
                                 std::span<const int32_t>(slots).first(tokens.size())});
      Status s = model_->Forward(batch, kv.view(), &threads_, logits.data());
      EXPECT_TRUE(s.ok()) << s.message();
      done = tokens.size();
      const auto best =
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      out.push_back(best);
      tokens.push_back(best);
    }
    return out;
  }

  std::vector<int32_t> Alloc(size_t n) {
    auto slots = pool_->Alloc((n + kPage - 1) / kPage * kPage);
    EXPECT_TRUE(slots.ok());
    return *slots;
  }

  std::shared_ptr<const model::CausalLM> model_;
  std::unique_ptr<kv::TokenToKVPool> pool_;
  std::unique_ptr<kv::KvStorage> storage_;
  ThreadPool threads_{2};
};

TEST_F(DraftRunnerTest, DraftsAreTheDraftModelsGreedyContinuation) {
  auto runner = MakeRunner();
  std::vector<int32_t> tokens = Tokens(13, 1);
  std::vector<int32_t> slots = Alloc(40);
  DraftJob job;
  job.tokens = tokens;
  job.slots = std::span<const int32_t>(slots).first(tokens.size() - 1);
  job.wanted = kSteps;
  ASSERT_TRUE(runner->Propose(std::span<DraftJob>(&job, 1), &threads_).ok());
  const std::vector<int32_t> greedy = Greedy(tokens, 8);
  EXPECT_EQ(job.drafts, std::vector<int32_t>(greedy.begin(), greedy.begin() + kSteps));
  EXPECT_EQ(runner->CurrentPrefix(job.slots), tokens.size() - 1);

  // Three drafts accepted (their target K/V now sits in real slots): the next call catches the
  // draft cache up over them and continues the same greedy chain.
  tokens.insert(tokens.end(), greedy.begin(), greedy.begin() + 3);
  job.tokens = tokens;
  job.slots = std::span<const int32_t>(slots).first(tokens.size() - 1);
  job.wanted = 3;
  EXPECT_EQ(runner->CurrentPrefix(job.slots), tokens.size() - 4);
  ASSERT_TRUE(runner->Propose(std::span<DraftJob>(&job, 1), &threads_).ok());
  EXPECT_EQ(job.drafts, std::vector<int32_t>(greedy.begin() + 3, greedy.begin() + 6));
  EXPECT_EQ(runner->CurrentPrefix(job.slots), tokens.size() - 1);
}

TEST_F(DraftRunnerTest, RowsOfAReusedPageAreRecomputed) {
  auto runner = MakeRunner();
  const std::vector<int32_t> first = Tokens(17, 2);
  std::vector<int32_t> slots = Alloc(first.size());
  DraftJob job;
  job.tokens = first;
  job.slots = std::span<const int32_t>(slots).first(first.size() - 1);
  job.wanted = 2;
  ASSERT_TRUE(runner->Propose(std::span<DraftJob>(&job, 1), &threads_).ok());
  EXPECT_EQ(runner->CurrentPrefix(job.slots), first.size() - 1);

  // The pages go back and come out again for other tokens: the rows are stale, and the drafts
  // are the new sequence's own.
  pool_->Free(slots);
  const std::vector<int32_t> second = Tokens(17, 3);
  std::vector<int32_t> reused = Alloc(second.size());
  EXPECT_EQ(reused, slots);  // freed pages are handed out first
  DraftJob other;
  other.tokens = second;
  other.slots = std::span<const int32_t>(reused).first(second.size() - 1);
  other.wanted = kSteps;
  EXPECT_EQ(runner->CurrentPrefix(other.slots), 0u);
  ASSERT_TRUE(runner->Propose(std::span<DraftJob>(&other, 1), &threads_).ok());
  const std::vector<int32_t> greedy = Greedy(second, kSteps);
  EXPECT_EQ(other.drafts, greedy);
}

TEST_F(DraftRunnerTest, TwoJobsAndACatchUpBudget) {
  // A 5-token budget per call: the long prompt catches up over several calls (no drafts until
  // it is done) while the short one drafts every call.
  auto runner = MakeRunner(/*catch_up=*/5);
  const std::vector<int32_t> short_tokens = Tokens(4, 4);
  const std::vector<int32_t> long_tokens = Tokens(21, 5);
  std::vector<int32_t> short_slots = Alloc(short_tokens.size());
  std::vector<int32_t> long_slots = Alloc(long_tokens.size());
  std::vector<DraftJob> jobs(2);
  jobs[0].tokens = short_tokens;
  jobs[0].slots = std::span<const int32_t>(short_slots).first(short_tokens.size() - 1);
  jobs[0].wanted = 2;
  jobs[1].tokens = long_tokens;
  jobs[1].slots = std::span<const int32_t>(long_slots).first(long_tokens.size() - 1);
  jobs[1].wanted = kSteps;
  const std::vector<int32_t> short_greedy = Greedy(short_tokens, 2);
  int calls = 0;
  while (jobs[1].drafts.empty()) {
    ASSERT_LT(++calls, 10);
    ASSERT_TRUE(runner->Propose(jobs, &threads_).ok());
    EXPECT_EQ(jobs[0].drafts, short_greedy);
  }
  EXPECT_GT(calls, 3);
  EXPECT_EQ(jobs[1].drafts, Greedy(long_tokens, kSteps));
}

}  // namespace
}  // namespace radixserve::spec

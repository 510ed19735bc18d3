// Tensor and pipeline parallelism in one process: ranks are threads joined by gloo over loopback
// TCP through our rendezvous store, all-reducing over TCP or shared memory and passing pipeline
// micro-batches over TCP; or in two levels (shared memory among a "node's" ranks, TCP between the
// nodes' first ranks). The reference is the whole model run alone: rank 0's logits and hidden
// rows through TensorParallelLeader (the other ranks running RunTensorParallelFollower) must match
// its own for a two-sequence prefill and decode steps. F32 weights: the shards' partial sums only
// reorder float additions, so logits agree to rounding. Also the store's own contract, the layer
// split and the refusals.
#include <gloo/common/error.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <thread>

#include "dist/tcp_store.h"
#include "dist/tp_group.h"
#include "dist/tp_model.h"
#include "model/model_loader.h"

namespace radixserve::dist {
namespace {

const std::string kStoriesGguf =
    std::string(RADIX_SHARED_DIR) + "/models/stories260K/gguf/stories260K.gguf";

std::unique_ptr<model::CausalLM> LoadStories(model::TensorShard shard = {},
                                             model::PipelineStage stage = {}) {
  model::LoadOptions o;
  o.model_path = kStoriesGguf;
  o.tensor_shard = shard;
  o.pipeline_stage = stage;
  auto lm = model::LoadModel(o);
  EXPECT_TRUE(lm.ok()) << lm.status().message();
  return lm.ok() ? std::move(lm).value() : nullptr;
}

// Two sequences prefilled in one step (24 and 9 tokens, logits of 3 rows, hidden states of 2),
// then 6 decode steps of both; every step's logits and hidden rows, concatenated.
std::vector<float> RunSteps(const model::CausalLM& lm, int64_t num_kv_heads) {
  const model::ModelConfig& c = lm.config();
  constexpr int kLongPrefill = 24, kShortPrefill = 9, kDecodes = 6;
  constexpr int kLong = kLongPrefill + kDecodes, kShort = kShortPrefill + kDecodes;
  model::KvCacheBuffers kv(c.num_layers, 64, num_kv_heads, c.head_dim);
  // Not starting at 0 and not adjacent: slots travel with each step.
  std::vector<int32_t> long_slots(kLong), short_slots(kShort);
  std::iota(long_slots.begin(), long_slots.end(), 5);
  std::iota(short_slots.begin(), short_slots.end(), 40);
  std::vector<int32_t> tokens{1};
  for (int i = 1; i < kLong; ++i) tokens.push_back(3 + (i * 37) % 500);
  const auto vocab = static_cast<size_t>(c.vocab_size), H = static_cast<size_t>(c.hidden_size);
  std::vector<float> all, logits(3 * vocab), hidden(2 * H);
  const auto keep = [&](size_t n_logits, size_t n_hidden) {
    all.insert(all.end(), logits.begin(), logits.begin() + n_logits * vocab);
    all.insert(all.end(), hidden.begin(), hidden.begin() + n_hidden * H);
  };
  model::ForwardBatch prefill;
  prefill.token_ids.assign(tokens.begin(), tokens.begin() + kLongPrefill);
  prefill.token_ids.insert(prefill.token_ids.end(), tokens.begin() + 3,
                           tokens.begin() + 3 + kShortPrefill);
  for (int64_t i = 0; i < kLongPrefill; ++i) prefill.positions.push_back(i);
  for (int64_t i = 0; i < kShortPrefill; ++i) prefill.positions.push_back(i);
  prefill.sequences.push_back({0, kLongPrefill, {long_slots.data(), kLongPrefill}});
  prefill.sequences.push_back({0, kShortPrefill, {short_slots.data(), kShortPrefill}});
  prefill.logit_indices = {kLongPrefill - 1, kLongPrefill + kShortPrefill - 1, 5};
  prefill.hidden_indices = {kLongPrefill + kShortPrefill - 1, 0};
  EXPECT_TRUE(lm.ForwardWithHidden(prefill, kv.view(), nullptr, logits.data(), hidden.data()).ok());
  keep(3, 2);
  for (int64_t step = 0; step < kDecodes; ++step) {
    const int64_t at_long = kLongPrefill + step, at_short = kShortPrefill + step;
    model::ForwardBatch b;
    b.token_ids = {tokens[static_cast<size_t>(at_long)], tokens[static_cast<size_t>(step)]};
    b.positions = {at_long, at_short};
    b.sequences.push_back({at_long, 1, {long_slots.data(), static_cast<size_t>(at_long + 1)}});
    b.sequences.push_back({at_short, 1, {short_slots.data(), static_cast<size_t>(at_short + 1)}});
    b.logit_indices = {0, 1};
    b.hidden_indices = {1};
    EXPECT_TRUE(lm.ForwardWithHidden(b, kv.view(), nullptr, logits.data(), hidden.data()).ok());
    keep(2, 1);
  }
  return all;
}

struct Layout {
  int tp = 1;
  int pp = 1;
  bool shared_memory = false;
  int64_t max_micro_batch_size = 0;
  int ranks_per_node = 1;  // > 1 (without shared_memory): two-level all-reduce
};

std::string Describe(const Layout& l) {
  return "tp " + std::to_string(l.tp) + " pp " + std::to_string(l.pp) +
         (l.shared_memory ? " shared memory" : " tcp") + " micro " +
         std::to_string(l.max_micro_batch_size) + " per node " + std::to_string(l.ranks_per_node);
}

// What rank 0 of tp x pp ranks computes through TensorParallelLeader: world rank g is
// tensor-parallel rank g % tp of stage g / tp, as src/main/tensor_parallel.cpp lays them out.
std::vector<float> RunSplit(const Layout& layout) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  EXPECT_TRUE(server.ok()) << server.status().message();
  const int port = (*server)->port(), size = layout.tp * layout.pp;
  std::vector<float> out;
  std::vector<int> follower_exit(static_cast<size_t>(size), -1);
  std::vector<std::thread> ranks;
  for (int r = 0; r < size; ++r) {
    ranks.emplace_back([&, r] {
      auto store = TcpStore::Connect("127.0.0.1", port, std::chrono::seconds(30));
      ASSERT_TRUE(store.ok()) << store.status().message();
      TpGroupOptions options;
      options.rank = r;
      options.size = size;
      options.timeout = std::chrono::seconds(60);
      options.shared_memory = layout.shared_memory && layout.pp == 1;
      options.ranks_per_node = layout.pp == 1 ? layout.ranks_per_node : 1;
      auto world = TpGroup::Connect(options, **store);
      ASSERT_TRUE(world.ok()) << world.status().message();
      EXPECT_EQ((*world)->hierarchical(), options.ranks_per_node > 1);
      const int stage = r / layout.tp, tp_rank = r % layout.tp;
      std::unique_ptr<TpGroup> stage_group;
      if (layout.tp > 1 && layout.pp > 1) {
        gloo::rendezvous::PrefixStore prefixed("stage" + std::to_string(stage), **store);
        TpGroupOptions stage_options = options;
        stage_options.rank = tp_rank;
        stage_options.size = layout.tp;
        stage_options.shared_memory = layout.shared_memory;
        auto connected = TpGroup::Connect(stage_options, prefixed);
        ASSERT_TRUE(connected.ok()) << connected.status().message();
        stage_group = std::move(connected).value();
      }
      GroupStageLink link(world->get(), layout.tp, tp_rank);
      model::AllReducer* reducer = layout.tp == 1           ? nullptr
                                   : stage_group != nullptr ? stage_group.get()
                                                            : world->get();
      std::shared_ptr<const model::CausalLM> part = LoadStories(
          {tp_rank, layout.tp, reducer}, {stage, layout.pp, &link, layout.max_micro_batch_size});
      ASSERT_NE(part, nullptr);
      if (r > 0) {
        follower_exit[static_cast<size_t>(r)] = RunTensorParallelFollower(*part, **world, nullptr);
        return;
      }
      const int64_t kv_heads = part->config().num_kv_heads;
      TensorParallelLeader leader(part, world->get());
      EXPECT_EQ(leader.config().num_heads * layout.tp, 8);  // the shard's heads
      EXPECT_EQ(leader.config().num_layers, model::StageLayers(5, 0, layout.pp).second);
      out = RunSteps(leader, kv_heads);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 1; r < size; ++r) EXPECT_EQ(follower_exit[static_cast<size_t>(r)], 0);
  return out;
}

TEST(TensorParallelTest, ShardsAndStagesGiveTheWholeModelsLogitsAndHiddenStates) {
  auto whole = LoadStories();
  ASSERT_NE(whole, nullptr);
  ASSERT_EQ(whole->config().num_layers, 5);
  const std::vector<float> expected = RunSteps(*whole, whole->config().num_kv_heads);
  const auto vocab = static_cast<size_t>(whole->config().vocab_size);
  for (const Layout& layout :
       {Layout{2, 1, false}, Layout{4, 1, false}, Layout{2, 1, true}, Layout{4, 1, true},
        Layout{1, 2, false}, Layout{1, 3, false}, Layout{1, 5, false}, Layout{1, 2, false, 1},
        Layout{2, 2, false}, Layout{2, 2, true}, Layout{4, 1, false, 0, 2}}) {
    const std::vector<float> got = RunSplit(layout);
    ASSERT_EQ(got.size(), expected.size()) << Describe(layout);
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
    EXPECT_LT(worst, 1e-4f) << Describe(layout);
    // The first step's first logits row: the same argmax.
    const auto argmax = [&](const std::vector<float>& v) {
      return std::max_element(v.begin(), v.begin() + vocab) - v.begin();
    };
    EXPECT_EQ(argmax(got), argmax(expected)) << Describe(layout);
  }
}

TEST(PipelineParallelTest, StagesTakeContiguousLayerRangesAndStepsEqualMicroBatches) {
  EXPECT_EQ(model::StageLayers(5, 0, 2), std::make_pair(int64_t{0}, int64_t{3}));
  EXPECT_EQ(model::StageLayers(5, 1, 2), std::make_pair(int64_t{3}, int64_t{5}));
  EXPECT_EQ(model::StageLayers(5, 2, 3), std::make_pair(int64_t{4}, int64_t{5}));
  EXPECT_EQ(model::StageLayers(30, 3, 4), std::make_pair(int64_t{23}, int64_t{30}));
  const model::PipelineStage two{0, 2, nullptr, 0}, capped{0, 2, nullptr, 4};
  EXPECT_EQ(model::MicroBatchCount(two, 100, 3), 2);
  EXPECT_EQ(model::MicroBatchCount(two, 1, 1), 1);  // a single decode token: no cut
  EXPECT_EQ(model::MicroBatchCount(capped, 10, 10), 3);
  EXPECT_EQ(model::MicroBatchCount(capped, 4, 4), 2);
}

// The followers rebuild every sequence's slot list from the changes the leader sends: over
// growing decode lists, prefill chunks, rows reused by other requests (other content at the
// same address), two sequences at one address in a step, more sequences than ids and lists
// swept after idling, the follower's list is always the leader's.
TEST(SlotTablesTest, FollowersRebuildEveryListFromTheChanges) {
  constexpr size_t kRows = 12;
  SlotTables leader(/*capacity=*/8);
  FollowerSlotTables follower;
  std::vector<std::vector<int32_t>> rows(kRows);
  for (auto& row : rows) row.reserve(10000);  // fixed addresses, as the table's rows have
  uint32_t seed = 12345;
  const auto next = [&] { return seed = seed * 1103515245u + 12345u, (seed >> 8) % 1000; };
  for (uint64_t step = 1; step < 400; ++step) {
    leader.Sweep(step);
    follower.Sweep(step);
    std::vector<size_t> batch;
    for (size_t i = 0; i < 6; ++i) batch.push_back(next() % kRows);
    for (size_t r : batch) {
      std::vector<int32_t>& row = rows[r];
      const uint32_t what = next() % 10;
      if (what == 0) row.clear();  // the row went to another request
      const size_t grow = what < 3 ? 1 + next() % 20 : 1;
      for (size_t i = 0; i < grow; ++i) row.push_back(static_cast<int32_t>(next()));
      if (what == 9 && row.size() > 2) row[row.size() / 2] ^= 1;  // a changed prefix
      const SlotTables::Change change = leader.Update(row, step);
      ASSERT_LE(change.keep, static_cast<int64_t>(row.size()));
      const std::span<const int32_t> added(row.data() + change.keep,
                                           row.size() - static_cast<size_t>(change.keep));
      const std::span<const int32_t> rebuilt = follower.Apply(
          static_cast<size_t>(change.id), static_cast<size_t>(change.keep), added, step);
      ASSERT_TRUE(std::equal(rebuilt.begin(), rebuilt.end(), row.begin(), row.end()))
          << "step " << step << " row " << r;
    }
  }
  // A step of more sequences than the capacity: every one gets an id of its own.
  std::vector<std::vector<int32_t>> wide(12, std::vector<int32_t>{4, 5, 6});
  for (size_t i = 0; i < wide.size(); ++i) {
    wide[i].push_back(static_cast<int32_t>(i));
    const SlotTables::Change change = leader.Update(wide[i], 400);
    const auto keep = static_cast<size_t>(change.keep);
    const std::span<const int32_t> rebuilt = follower.Apply(
        static_cast<size_t>(change.id), keep, {wide[i].data() + keep, wide[i].size() - keep}, 400);
    ASSERT_TRUE(std::equal(rebuilt.begin(), rebuilt.end(), wide[i].begin(), wide[i].end()));
  }
  // A decode step sends one slot per sequence, not its context (the list stays where it is, as a
  // row of the request-to-token table does).
  std::vector<int32_t> context(100);
  context.reserve(200);
  std::iota(context.begin(), context.end(), 7);
  EXPECT_EQ(leader.Update(context, 401).keep, 0);
  context.push_back(3);
  EXPECT_EQ(leader.Update(context, 402).keep, 100);
}

class NeverLinks : public model::StageLink {
 public:
  void SendTo(int, const float*, int64_t) override { ADD_FAILURE() << "no step should run"; }
  void ReceiveFrom(int, float*, int64_t) override { ADD_FAILURE() << "no step should run"; }
  void Flush() override {}
};

TEST(PipelineParallelTest, RefusesMoreStagesThanLayers) {
  NeverLinks link;
  model::LoadOptions o;
  o.model_path = kStoriesGguf;
  o.pipeline_stage = {0, 6, &link, 0};  // 5 layers
  auto lm = model::LoadModel(o);
  ASSERT_FALSE(lm.ok());
  EXPECT_EQ(lm.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(lm.status().message().find("argument --pp-size: 6 stages cannot split the 5 layers"),
            std::string::npos)
      << lm.status().message();
}

// Every rank's values summed, on every rank: small buffers (one exchange), large ones (gloo's ring
// with 3 ranks; shared memory in slot-sized pieces).
TEST(TensorParallelTest, AllReduceSumsEveryRanksBuffer) {
  for (bool shm : {false, true}) {
    for (int64_t count : {int64_t{5}, int64_t{300'000}}) {
      constexpr int kRanks = 3;
      auto server = TcpStoreServer::Start("127.0.0.1", 0);
      ASSERT_TRUE(server.ok());
      std::vector<std::vector<float>> results(kRanks);
      std::vector<std::thread> ranks;
      for (int r = 0; r < kRanks; ++r) {
        ranks.emplace_back([&, r] {
          auto store = TcpStore::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(30));
          ASSERT_TRUE(store.ok());
          TpGroupOptions options;
          options.rank = r;
          options.size = kRanks;
          options.shared_memory = shm;
          auto group = TpGroup::Connect(options, **store);
          ASSERT_TRUE(group.ok()) << group.status().message();
          std::vector<float> data(static_cast<size_t>(count));
          for (int64_t i = 0; i < count; ++i) data[static_cast<size_t>(i)] = (r + 1) * 0.5f + i;
          (*group)->AllReduceSum(data.data(), count);
          (*group)->AllReduceSum(data.data(), count);  // again: the slots are reused
          results[static_cast<size_t>(r)] = std::move(data);
        });
      }
      for (std::thread& t : ranks) t.join();
      for (int64_t i = 0; i < count; i += 997) {
        const float once = 3.0f + 3.0f * static_cast<float>(i);  // 0.5 + 1 + 1.5 + 3i
        EXPECT_FLOAT_EQ(results[0][static_cast<size_t>(i)], 3.0f * once)
            << (shm ? "shm " : "tcp ") << count << " at " << i;
      }
      EXPECT_EQ(results[0], results[1]);  // the same bits on every rank
      EXPECT_EQ(results[0], results[2]);
    }
  }
}

class NeverReduces : public model::AllReducer {
 public:
  void AllReduceSum(float*, int64_t) override { ADD_FAILURE() << "no step should run"; }
};

TEST(TensorParallelTest, RefusesSizesThatDoNotDivideTheHeads) {
  NeverReduces group;
  model::LoadOptions o;
  o.model_path = kStoriesGguf;
  o.tensor_shard = {0, 3, &group};  // 8 heads, 4 KV heads
  auto lm = model::LoadModel(o);
  ASSERT_FALSE(lm.ok());
  EXPECT_EQ(lm.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(lm.status().message().find("argument --tp-size: 3"), std::string::npos)
      << lm.status().message();
  EXPECT_NE(lm.status().message().find("num_attention_heads 8"), std::string::npos);
}

TEST(TcpStoreTest, ClientsSeeEachOthersKeysAndWaitWithATimeout) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().message();
  auto a = TcpStore::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5));
  auto b = TcpStore::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5));
  ASSERT_TRUE(a.ok() && b.ok());
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (*a)->set("rank0", {'x', '\0', 'y'});
  });
  EXPECT_EQ((*b)->get("rank0"), (std::vector<char>{'x', '\0', 'y'}));  // waits for the set
  setter.join();
  EXPECT_THROW((*b)->wait({"never"}, std::chrono::milliseconds(50)), ::gloo::IoException);
}

TEST(TcpStoreTest, ConnectGivesUpAfterItsTimeout) {
  // A port nothing listens on: the server of a store started and stopped at once.
  int port = 0;
  {
    auto server = TcpStoreServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(server.ok());
    port = (*server)->port();
  }
  auto store = TcpStore::Connect("127.0.0.1", port, std::chrono::milliseconds(300));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(store.status().message().find("cannot reach the rendezvous store"), std::string::npos);
}

TEST(TcpStoreTest, ParsesHostPort) {
  auto ok = ParseHostPort("10.0.0.2:25000", "--dist-init-addr");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->first, "10.0.0.2");
  EXPECT_EQ(ok->second, 25000);
  for (const char* bad : {"10.0.0.2", ":1", "host:", "host:99999", "host:1x"}) {
    auto parsed = ParseHostPort(bad, "--dist-init-addr");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("argument --dist-init-addr"), std::string::npos);
  }
}

}  // namespace
}  // namespace radixserve::dist

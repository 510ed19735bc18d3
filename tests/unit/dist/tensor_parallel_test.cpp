// Tensor parallelism in one process: ranks are threads joined by gloo over loopback TCP through
// our rendezvous store, all-reducing over TCP or shared memory. The reference is the whole model
// run alone: rank 0's logits through TensorParallelLeader (the other ranks running
// RunTensorParallelFollower) must match its logits for a prefill and decode steps. F32 weights: the
// shards' partial sums only reorder float additions, so logits agree to rounding. Also the store's
// own contract and the refusals.
#include <gloo/common/error.h>
#include <gtest/gtest.h>

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

std::unique_ptr<model::CausalLM> LoadStories(model::TensorShard shard = {}) {
  model::LoadOptions o;
  o.model_path = kStoriesGguf;
  o.tensor_shard = shard;
  auto lm = model::LoadModel(o);
  EXPECT_TRUE(lm.ok()) << lm.status().message();
  return lm.ok() ? std::move(lm).value() : nullptr;
}

// A 24-token prefill then 6 decode steps; the logits of every step, concatenated.
std::vector<float> RunSteps(const model::CausalLM& lm, int64_t num_kv_heads) {
  const model::ModelConfig& c = lm.config();
  constexpr int kPrefill = 24, kDecodes = 6, kTotal = kPrefill + kDecodes;
  model::KvCacheBuffers kv(c.num_layers, kTotal + 8, num_kv_heads, c.head_dim);
  std::vector<int32_t> slots(kTotal);
  std::iota(slots.begin(), slots.end(), 5);  // not starting at 0: slots travel with each step
  std::vector<int32_t> tokens{1};
  for (int i = 1; i < kTotal; ++i) tokens.push_back(3 + (i * 37) % 500);
  std::vector<float> all, logits(static_cast<size_t>(c.vocab_size));
  model::ForwardBatch prefill;
  prefill.token_ids.assign(tokens.begin(), tokens.begin() + kPrefill);
  for (int64_t i = 0; i < kPrefill; ++i) prefill.positions.push_back(i);
  prefill.logit_indices = {kPrefill - 1};
  prefill.sequences.push_back({0, kPrefill, std::span<const int32_t>(slots.data(), kPrefill)});
  EXPECT_TRUE(lm.Forward(prefill, kv.view(), nullptr, logits.data()).ok());
  all.insert(all.end(), logits.begin(), logits.end());
  for (int64_t done = kPrefill; done < kTotal; ++done) {
    const std::span<const int32_t> seq(slots.data(), static_cast<size_t>(done + 1));
    model::ForwardBatch b{
        {tokens[static_cast<size_t>(done)]}, {done}, {{done, 1, seq}}, {0}, {}, {}};
    EXPECT_TRUE(lm.Forward(b, kv.view(), nullptr, logits.data()).ok());
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

// The logits rank 0 of `size` ranks computes through TensorParallelLeader; all-reduce over
// shared memory or gloo's TCP pairs.
std::vector<float> RunTensorParallel(int size, bool shared_memory) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  EXPECT_TRUE(server.ok()) << server.status().message();
  const int port = (*server)->port();
  std::vector<float> logits;
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
      options.shared_memory = shared_memory;
      auto group = TpGroup::Connect(options, **store);
      ASSERT_TRUE(group.ok()) << group.status().message();
      EXPECT_EQ((*group)->shared_memory(), shared_memory);
      std::shared_ptr<const model::CausalLM> shard = LoadStories({r, size, group->get()});
      ASSERT_NE(shard, nullptr);
      if (r > 0) {
        follower_exit[static_cast<size_t>(r)] = RunTensorParallelFollower(*shard, **group, nullptr);
        return;
      }
      const int64_t kv_heads = shard->config().num_kv_heads;
      TensorParallelLeader leader(shard, group->get());
      EXPECT_EQ(leader.config().num_heads * size, 8);  // the shard's heads
      logits = RunSteps(leader, kv_heads);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 1; r < size; ++r) EXPECT_EQ(follower_exit[static_cast<size_t>(r)], 0);
  return logits;
}

TEST(TensorParallelTest, ShardsGiveTheWholeModelsLogits) {
  auto whole = LoadStories();
  ASSERT_NE(whole, nullptr);
  const std::vector<float> expected = RunSteps(*whole, whole->config().num_kv_heads);
  const auto vocab = static_cast<size_t>(whole->config().vocab_size);
  for (auto [size, shm] : {std::pair{2, false}, {4, false}, {2, true}, {4, true}}) {
    const std::vector<float> got = RunTensorParallel(size, shm);
    ASSERT_EQ(got.size(), expected.size()) << "tp " << size;
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
    EXPECT_LT(worst, 1e-4f) << "tp " << size << (shm ? " shared memory" : " tcp");
    for (size_t step = 0; step < got.size() / vocab; ++step) {
      const auto argmax = [&](const std::vector<float>& v) {
        return std::max_element(v.begin() + step * vocab, v.begin() + (step + 1) * vocab) -
               v.begin();
      };
      EXPECT_EQ(argmax(got), argmax(expected)) << "tp " << size << " step " << step;
    }
  }
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

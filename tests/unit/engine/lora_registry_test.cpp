#include "engine/lora_registry.h"

#include <gtest/gtest.h>

namespace radixserve::engine {
namespace {

TEST(LoraPathSpecTest, ParsesSglangsThreeForms) {
  auto plain = ParseLoraPathSpec("/adapters/sql");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->name, "/adapters/sql");
  EXPECT_EQ(plain->path, "/adapters/sql");
  EXPECT_FALSE(plain->pinned);

  auto named = ParseLoraPathSpec("sql=/adapters/sql=v2");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->name, "sql");
  EXPECT_EQ(named->path, "/adapters/sql=v2");

  auto json = ParseLoraPathSpec(R"({"lora_name": "sql", "lora_path": "/a", "pinned": true})");
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->name, "sql");
  EXPECT_EQ(json->path, "/a");
  EXPECT_TRUE(json->pinned);
}

TEST(LoraPathSpecTest, RefusesMalformedEntries) {
  EXPECT_FALSE(ParseLoraPathSpec("=").ok());
  EXPECT_FALSE(ParseLoraPathSpec("name=").ok());
  EXPECT_FALSE(ParseLoraPathSpec(R"({"lora_name": "x"})").ok());
  EXPECT_FALSE(ParseLoraPathSpec(R"({"lora_name": "x", "lora_path": "/a", "pinned": 1})").ok());
  EXPECT_FALSE(ParseLoraPathSpec(R"({"lora_name": "x", "lora_path": "/a", "rank": 8})").ok());
  EXPECT_FALSE(ParseLoraPathSpec("{not json").ok());
}

TEST(LoraTargetsTest, ExpandsGroupsAndAll) {
  auto targets = ParseLoraTargets({"qkv_proj", "down_proj", "q_proj"});
  ASSERT_TRUE(targets.ok());
  EXPECT_EQ(*targets,
            (std::vector<model::LoraTarget>{model::LoraTarget::kQ, model::LoraTarget::kK,
                                            model::LoraTarget::kV, model::LoraTarget::kDown}));
  auto all = ParseLoraTargets({"o_proj", "all"});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
  EXPECT_FALSE(ParseLoraTargets({"lm_head"}).ok());
}

// A model whose adapters never load: the registry passes the error on and stays empty.
class NoLoraModel final : public model::CausalLM {
 public:
  const model::ModelConfig& config() const override { return config_; }
  int64_t weight_bytes() const override { return 0; }
  Status Forward(const model::ForwardBatch&, const model::KvCacheView&, ThreadPool*,
                 float*) const override {
    return Status::Ok();
  }

 private:
  model::ModelConfig config_;
};

TEST(LoraRegistryTest, FailedLoadsLeaveNothingBehind) {
  LoraRegistry registry(std::make_shared<const NoLoraModel>(), {});
  Status status = registry.Load("a", "/nowhere", false);
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(registry.List().empty());
  EXPECT_FALSE(registry.Find("a").has_value());
  EXPECT_FALSE(registry.Unload("a").ok());
  EXPECT_FALSE(registry.Load("", "/nowhere", false).ok());
  // The name is free again after the failure.
  EXPECT_EQ(registry.Load("a", "/nowhere", false).message(), status.message());
}

}  // namespace
}  // namespace radixserve::engine
